package driver

import "context"

// Notifier is the optional capability of telling the instances that share a database of new
// due items and of changed circuit breakers at once (PostgreSQL's LISTEN/NOTIFY). Without it
// (an Executor that does not implement it, or whose Notifies is false) each scheduler finds
// new items at its next poll (Config.PollInterval) and a BreakerStore polls for its changes.
type Notifier interface {
	// Notifies reports whether the executor tells the instances sharing its database of new
	// items (with PostgreSQL, when its database/sql driver can listen): NotifyDue then reaches
	// their WatchDue.
	Notifies() bool

	// NotifyDue tells the instances watching the store (WatchDue), except those watching as
	// sender, that an item is due: one statement, committed on its own. Without notifications
	// (Notifies is false) it does nothing.
	NotifyDue(ctx context.Context, sender string) error

	// WatchDue listens, on a connection of its own, for NotifyDue of any sender but self (and for
	// the enqueues in a transaction, which notify when it commits: EnqueueTx), until ctx ends or
	// the connection fails: it calls listening with the connection's backend process id once it
	// listens (what was notified before may not be told), and notified for each notification
	// after. It returns ctx's error when ctx ended, the error that stopped it otherwise, and
	// ErrNoNotifications at once on an engine without notifications.
	WatchDue(ctx context.Context, self string, listening func(pid int64), notified func()) error

	// WatchBreakers listens, on a connection of its own, for the changes of name's breakers that
	// any instance commits, until ctx ends or the connection fails: it calls listening once it
	// listens (changes committed before may not be told) and changed for each change after (a
	// burst of changes may be told once). It returns ctx's error when ctx ended, the error that
	// stopped it otherwise, and ErrNoNotifications at once on an engine without notifications.
	WatchBreakers(ctx context.Context, name string, listening, changed func()) error
}
