//go:build race

package durable_test

// raceEnabled reports whether the tests run under the race detector, which slows every
// process (the children too) several times over.
const raceEnabled = true
