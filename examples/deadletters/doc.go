// Command deadletters shows a durable queue's dead letters from the first failure to the last
// replay, on the embedded SQLite default. Invoices are copied into a ledger whose currency rates
// service has no rate for pounds until it is fixed: the invoices it cannot book are deferred into
// the queue, retried by the scheduler under a retry policy, and become dead letters once their
// attempts are used up. The program lists the letters with their errors and attempts, replays
// one too early (it stays failed), fixes the rates service, replays one letter and then several
// in one bulk call, discards one with a reason, and prints counts that add up.
package main
