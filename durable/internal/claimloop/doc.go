// Package claimloop is the durable queue's claim/complete loop: it claims due items only for
// free workers, hands each to a worker that runs it through the executor, and writes the
// outcomes of the items that finished together with the next claim, in one round trip.
package claimloop
