// Package record holds what a durable queue stores and an operator or observer reads: items and
// their attempts, dead letters and their timelines, schedules and their runs, and the states
// and outcomes they are in.
//
// It is plain data and imports only the standard library, so code that reads records (a
// dashboard, an alert, a test's assertion) names their types without the queue's behavior in
// view. Package durable returns them (Queue.Item, Queue.Attempts, Queue.DeadLetter,
// Queue.Schedules and the other readers) and takes them as filters and ids; docs/durable.md
// gives the item state machine, docs/dead-letters.md an operator's work on letters.
package record
