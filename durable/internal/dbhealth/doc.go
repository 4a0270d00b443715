// Package dbhealth logs the failures of a database's calls without flooding the log: the first
// failure at once, then at most every Repeat while they go on, and one line when a call
// succeeds again. The queue's services (the claim loop, the gate, rescue, the notifier) and
// the fleet stores each keep one.
package dbhealth
