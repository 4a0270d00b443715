package durable

import (
	"context"
	"fmt"

	"github.com/switchboard-go/switchboard/durable/driver"
)

// notifierOf returns st's notifications when its driver gives them (driver.Notifier), and
// otherwise a Notifier that never notifies: the schedulers and breaker stores then poll.
func notifierOf(st driver.Executor) driver.Notifier {
	if n, ok := st.(driver.Notifier); ok {
		return n
	}
	return silent{}
}

// silent is the Notifier of a driver without notifications.
type silent struct{}

func (silent) Notifies() bool                                     { return false }
func (silent) NotifyDue(ctx context.Context, sender string) error { return nil }
func (silent) WatchDue(ctx context.Context, self string, listening func(pid int64), notified func()) error {
	return driver.ErrNoNotifications
}
func (silent) WatchBreakers(ctx context.Context, name string, listening, changed func()) error {
	return driver.ErrNoNotifications
}

// finderOf returns st's ItemFinder, or an error saying its driver lacks it.
func finderOf(st driver.Executor) (driver.ItemFinder, error) {
	if f, ok := st.(driver.ItemFinder); ok {
		return f, nil
	}
	return nil, fmt.Errorf("durable: Find: the queue's driver (executor %T) does not implement driver.ItemFinder", st)
}

// fleetStoresOf returns st's fleet stores (driver.FleetStores), or an error naming the
// constructor that needs them (what) when its driver lacks them.
func fleetStoresOf(st driver.Executor, what string) (driver.FleetStores, error) {
	if fs, ok := st.(driver.FleetStores); ok {
		return fs, nil
	}
	return nil, fmt.Errorf("durable: %s: the queue's driver (executor %T) does not implement driver.FleetStores, which shared breakers and rate limits need", what, st)
}
