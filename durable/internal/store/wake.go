package store

import (
	"context"
	"strconv"
	"strings"
)

// ItemsChannel is the PostgreSQL channel on which an enqueue of an item due at once is notified,
// with the payload the oid of the switchboard_items table it went into (a channel is the
// database's, not a schema's, and the oid keeps the queues of other schemas apart), followed,
// for NotifyDue, by a space and the sender's name.
const ItemsChannel = "switchboard_items"

// itemsOID is the oid of the items table the search_path finds, as text.
const itemsOID = `'switchboard_items'::regclass::oid::text`

// notifyDueSQL notifies ItemsChannel from the sender $1.
const notifyDueSQL = `SELECT pg_notify('` + ItemsChannel + `', ` + itemsOID + ` || ' ' || $1::text)`

// notifyTxSQL notifies ItemsChannel without a sender: every watcher takes it.
const notifyTxSQL = `SELECT pg_notify('` + ItemsChannel + `', ` + itemsOID + `)`

// Notifies reports whether the store's engine tells the instances sharing its database of new
// items (PostgreSQL, with a driver that can listen): NotifyDue then reaches their WatchDue.
func (s *Store) Notifies() bool {
	e, ok := s.e.(*postgresEngine)
	return ok && e.drv.Listen != nil
}

// NotifyDue tells the instances watching the store (WatchDue), except those watching as
// sender, that an item is due: one statement, committed on its own. Without notifications
// (Notifies is false) it does nothing.
func (s *Store) NotifyDue(ctx context.Context, sender string) error {
	if !s.Notifies() {
		return nil
	}
	_, err := s.db.ExecContext(ctx, notifyDueSQL, sender)
	return err
}

// WatchDue listens, on a connection of its own, for NotifyDue of any sender but self (and for
// the enqueues in a transaction, which notify when it commits: EnqueueTx), until ctx ends or
// the connection fails: it calls listening with the connection's backend process id once it
// listens (what was notified before may not be told), and notified for each notification
// after. It returns ctx's error when ctx ended, the error that stopped it otherwise, and
// ErrNoNotifications at once on an engine without notifications.
func (s *Store) WatchDue(ctx context.Context, self string, listening func(pid int64), notified func()) error {
	e, ok := s.e.(*postgresEngine)
	if !ok || e.drv.Listen == nil {
		return ErrNoNotifications
	}
	var oid int64
	if err := s.db.QueryRowContext(ctx, `SELECT 'switchboard_items'::regclass::oid::bigint`).Scan(&oid); err != nil {
		return err
	}
	table := strconv.FormatInt(oid, 10)
	own := table + " " + self
	return s.listen(ctx, e, ItemsChannel, listening, func(payload string) {
		if payload != own && (payload == table || strings.HasPrefix(payload, table+" ")) {
			notified()
		}
	})
}
