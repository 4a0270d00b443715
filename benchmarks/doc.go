// Package benchmarks measures switchboard beside peer libraries and floors in one run, so ratios
// compare like with like on the same machine. It is its own module: the peers (River, gobreaker,
// failsafe-go, retry-go) and the charts' gonum/plot never enter the library's go.mod.
//
// # The comparison tables and docs/benchmarks.md
//
// From the repository root, make bench runs the comparisons and prints their tables in
// Markdown: each switchboard figure beside its peers' or baseline's from the same process, with
// their ratios, and the machine's load average at the start and the end (figures from a busy
// machine say less). It then writes docs/benchmarks.md from the same output: the tables, the
// machine and command of the run (nproc, CPU model, Go, PostgreSQL and PgBouncer versions, load,
// date), figures of other Go mediators quoted from elsewhere and marked so, and SVG charts in
// docs/benchmarks/ (ns per call of the in-process cases; items/s by worker count of each
// drain). One command regenerates all of it. With BENCH_COUNT=3 runs of each benchmark, whose
// medians it prints, it took 11 minutes on two cores under a load average of 10 to 14, most of
// it in the drains. The raw output, with the run's description, stays in benchmarks/.bench.out,
// and make bench-docs rewrites the page from it. PostgreSQL rows need SWITCHBOARD_TEST_PG_DSN, a
// server where the run may create and drop schemas and databases; the rows through PgBouncer
// also need SWITCHBOARD_TEST_PGBOUNCER_DSN, a PgBouncer in transaction pooling mode in front of
// that server that passes any database name through (scripts/with-postgres.sh starts both).
// Without them they are skipped, and make bench and the page say so (under CI=true a missing
// DSN fails the run instead). The fleets of 50 instances reached directly run only on a server
// with room for 500 more connections (10 per instance, the default budget): elsewhere they are
// skipped, since a server out of connections refuses every other client too. make bench-all
// runs every benchmark of the library and of this module, without the tables.
//
//	SWITCHBOARD_TEST_PG_DSN='postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable' make bench
//	make bench BENCH_COUNT=5
//
// The tables are package internal/benchfmt reading go test -bench output, which works on any
// run of this module's benchmarks: cmd/benchtable prints them, cmd/benchdocs writes the page.
//
//	go test -run '^$' -bench 'BenchmarkDrain/sqlite/noop' -benchtime 1x | go run ./cmd/benchtable
//
// # The drains
//
// BenchmarkDrain/<engine>/<handler>/w=<workers>/<system> seeds a fresh database (a schema of
// its own on PostgreSQL, a new file on SQLite) with a fixed number of due items (20,000 on
// PostgreSQL and 5,000 on SQLite at 8 and 32 workers, 2,000 at 1 worker), untimed, then runs
// them with 1, 8 or 32 workers until every item's outcome is stored and the system has stopped.
// The handler does nothing (noop) or inserts one row into a side table of the same database
// (insert), through the same pool in every system. Each reports items/s, the Go process's CPU
// time per item (user and system, from getrusage: the PostgreSQL server is another process and
// is not counted; SQLite runs inside this one and is), and per item ns/op, B/op and allocs/op.
// Run them with -benchtime 1x. The systems:
//
//   - switchboard: durable.Open with durable/postgres or durable/sqlite, the items enqueued
//     through EnqueueTx, the scheduler of Queue.Start with Config.Workers, and
//     Shutdown once the last item ran. Only the public API: the figures follow whatever the
//     scheduler does.
//   - switchboard-pgbouncer (PostgreSQL only): switchboard with the queue's pool through
//     PgBouncer (postgres.Config.TransactionPooling: no prepared statements, no LISTEN), on a
//     database of its own, since PgBouncer 1.18 refuses a search_path; the seed and the
//     handlers' inserts reach that database directly, as in switchboard's row, so that its
//     ratio to that row is the queue's own path through PgBouncer.
//   - river: River's client with MaxWorkers workers on its own pgx pool (riverpgxv5) or on the
//     SQLite file (riversqlite), jobs inserted with InsertManyFast. Its FetchCooldown is set
//     to its minimum, 1 ms: the default 100 ms caps a drain at MaxWorkers items per 100 ms.
//   - floor: no framework. A loop issues the switchboard scheduler's own claim (FOR UPDATE
//     SKIP LOCKED on PostgreSQL) and completion statements on the same tables, copied from
//     durable/internal/store: it claims as many items as there are workers, runs them all at
//     once (their payloads decoded), waits for them, and writes their completions with the
//     next claim in one round trip (a batch on pgx's own pool on PostgreSQL, without
//     database/sql; one transaction on SQLite), until a claim finds nothing. Every round trip is as full as the workers allow and nothing else
//     runs, so switchboard ÷ floor is what the scheduler costs beyond its SQL. With one
//     worker the floor waits for each item before the next claim, which a scheduler that
//     claims ahead need not do, so there it can be beaten.
//
// TestDrainHarness checks each system on a small queue: every item handled once, stored as
// done, its side row written. TestFloorStatementsMatchStore reads the store's source and fails
// when the floor's copies of its statements no longer match.
//
// # The fleets
//
// BenchmarkIdleFleet/<via>/instances=<N> and BenchmarkFleetPickup run N instances of the queue
// in this process, each its own durable.Open with its own pool (postgres.Open's default budget)
// and InstanceID, each with a BreakerStore (defaults) with one subscriber, on a PostgreSQL
// database of their own, reached directly (via direct: the instances LISTEN, and each one's
// application_name is its InstanceID) or through PgBouncer (via pgbouncer: TransactionPooling,
// the schedulers poll; every instance keeps the default application_name, since PgBouncer sends
// a SET of a client's application_name, a transaction of its own, before each transaction it
// runs on a server connection last used by a client of another name). Run them with
// -benchtime 1x: one op is a whole measurement, sized for it.
//
//   - BenchmarkIdleFleet, N of 1, 10 and 50: every instance runs a scheduler at the default
//     settings (PollInterval 1 s) with nothing to do. After 3 s to settle, a window of 5 s
//     counts the database's transactions per second (pg_stat_database's xact_commit +
//     xact_rollback, read from another database; each statement the queue sends is one) and
//     the connections held (pg_stat_activity, sampled every 250 ms; through PgBouncer also the
//     client connections in its SHOW CLIENTS), for the fleet and per instance.
//   - BenchmarkFleetPickup: one instance enqueues 200 items, each once the outcome of the one
//     before is stored, and the other N−1 run schedulers; from the start of each Enqueue to the
//     start of its handler on another instance, the median, 95th percentile and mean, and,
//     through Config.OnClaim, the median time to the start of the claim that took the item and
//     of that claim's round trip, and the claims per item. Directly with 2 and 50 instances,
//     through PgBouncer with 50 at a PollInterval of 100 ms and of 1 s.
//
// # In process
//
// Each beside its baseline or peers, one goroutine unless said otherwise:
//
//   - BenchmarkSend and BenchmarkTypedSend (no behaviors) and BenchmarkSendThreeBehaviors (3
//     pass-through behaviors) beside BenchmarkDirectCall, the handler called through its
//     interface.
//   - BenchmarkStream of 3 items beside BenchmarkStreamDirect, ranging the handler's sequence.
//   - BenchmarkFallbackRetryBreaker, switchboard's fallback, retry (3 attempts) and breaker on
//     the success path beside failsafe-go's same policies; BenchmarkFallbackRetryBreakerTimeout
//     adds a timeout of each (1 s, never reached).
//   - BenchmarkBreaker and BenchmarkBreakerParallel (RunParallel, GOMAXPROCS goroutines):
//     switchboard's breaker gate beside sony/gobreaker's Execute and failsafe-go's circuit
//     breaker, each with its defaults.
//   - BenchmarkRetryLoop: switchboard's retry behavior beside cenkalti/backoff/v4 and
//     avast/retry-go/v4, 3 attempts and zero delay each, on success and on a call that fails
//     once and then succeeds, so that the loops' own work is measured, not a sleep.
//   - BenchmarkKeyedBreaker, Gate and Done over 1M keys on a registry bounded to 10k breakers
//     (switchboard) beside a plain map bounded to 10k keys, a miss deleting the oldest key and
//     inserting the new one (map).
//
// The other benchmarks of this module (rate limiter, retry budget, hedge, the parallel direct
// call) run with make bench-all:
//
//	go test -run '^$' -bench . -skip '^Benchmark(Drain|IdleFleet|FleetPickup)$' -benchmem -cpu 1,2
//
// # Chaos and pressure
//
// Package internal/chaos is the core of a harness that runs job systems on PostgreSQL through
// the scenarios of faults and pressure of the public PostgreSQL job-queue benchmark's method
// (five chaos scenarios: a replica killed, PostgreSQL restarted, repeated kills, backends
// terminated, the pool exhausted; four pressure cells: idle in transaction, 1.5× load, active
// readers, a burst) and scores each system: chaos n/5 and pressure n/4, a cell passing with 0
// jobs lost, no timeout, and throughput back to 90 % of the clean phase's within the
// scenario's bound. Its scheduler, accounting and scorecard are tested against an in-memory
// system; internal/chaos/pgchaos has the PostgreSQL faults and the Diagnoser, and
// internal/chaos/replicas runs switchboard and River as replica processes
// (cmd/chaosreplica). make chaos runs the scorecard (cmd/chaos) on a server of its own:
//
//	make chaos                     # the short profile: the method's durations divided
//	make chaos CHAOS_PROFILE=long  # the method's durations, hours
//
// and leaves the Markdown scorecard in benchmarks/.chaos.md.
package benchmarks
