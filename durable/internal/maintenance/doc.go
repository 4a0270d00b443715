// Package maintenance holds the durable queue's background upkeep of an instance: the rescuer,
// which extends the leases of the items the instance runs and sweeps the expired leases of
// every instance back into the queue, and the pruner, which deletes succeeded items past
// their retention.
package maintenance
