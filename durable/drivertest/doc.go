// Package drivertest is the conformance suite of package durable/driver: Exercise runs, as
// subtests, what the durable engine asks of a driver, through the public durable API (an
// enqueue runs, retries at the policy's times, dead-letters, dedupes, keeps an ordering key's
// order, pauses, limits, cancels, replays and discards, schedules, two queues share one
// database) and on the driver's Executor directly (leases and fences, sweeps, migrations),
// then the optional capabilities the Executor implements: driver.Notifier (a notification
// wakes another instance's scheduler that does not poll) and driver.FleetStores (shared
// breakers and rate limits), or, when it lacks FleetStores, that the stores needing it fail
// saying so.
//
// A driver's own test runs it:
//
//	func TestConformance(t *testing.T) {
//		drivertest.Exercise(t, func(t *testing.T) driver.Driver {
//			return mydriver.Open(freshDatabase(t))
//		})
//	}
//
// The built-in drivers run it in their packages' tests (durable/sqlite, durable/postgres).
package drivertest
