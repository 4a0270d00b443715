// Package notify wakes the schedulers of other instances when items come due (PostgreSQL). An
// enqueue of an item due now wakes its own instance's claim loop directly and asks the queue's
// Notifier to tell the others: the notifier sends one NOTIFY at a time, on a connection of the
// pool and after the enqueue committed: at once when it is idle, otherwise Gap after the last
// one, a notification that tells every enqueue made since. So a burst of enqueues costs one
// notification per Gap, not one each, and no enqueue waits for one. Each scheduler keeps a
// connection listening (Listener); a notification makes it claim at once. When that connection
// fails the scheduler polls as always and listens again; once it listens it claims at once, for
// what was enqueued meanwhile.
package notify
