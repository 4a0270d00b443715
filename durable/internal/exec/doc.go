// Package exec runs a queue's due items one at a time, in the calling goroutine, through the
// scheduler's own executor: the executor package durable/durabletest drives. Package durable
// registers, when it is loaded, how to reach a queue's internals (Register); durabletest finds
// them with Of. So a queue shows no method for tests, and no package outside the module, which
// cannot import this one, reaches them.
package exec
