// Package benchmarks measures switchboard beside peer libraries and floors in one run, so ratios
// compare like with like on the same machine. It is its own module: the peers (River, gobreaker,
// failsafe-go) never enter the library's go.mod.
//
// # The comparison table
//
// From the repository root, make bench prints one Markdown table of every comparison, each
// switchboard figure beside its peer's or baseline's from the same process, with their ratio,
// and the machine's load average at the start and the end (figures from a busy machine say
// less). It takes about five minutes on two cores with BENCH_COUNT=3 runs of each benchmark,
// whose medians it prints (the raw output stays in benchmarks/.bench.out). PostgreSQL rows need SWITCHBOARD_TEST_PG_DSN, a server where the run
// may create and drop schemas; without it they are skipped, and make bench says so (under
// CI=true a missing DSN fails the run instead). make bench-all runs every benchmark of the
// library and of this module, without the table.
//
//	SWITCHBOARD_TEST_PG_DSN='postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable' make bench
//	make bench BENCH_COUNT=5
//
// The table is cmd/benchtable reading go test -bench output, which works on any run of this
// module's benchmarks:
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
//     through EnqueueTx, the scheduler of Queue.Start with SchedulerConfig.Workers, and
//     Shutdown once the last item ran. Only the public API: the figures follow whatever the
//     scheduler does.
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
// # In process
//
// Each beside its baseline: BenchmarkSend and BenchmarkTypedSend (no behaviors) beside
// BenchmarkDirectCall, the handler called through its interface; BenchmarkStream of 3 items
// beside BenchmarkStreamDirect, ranging the handler's sequence; BenchmarkKeyedBreaker, Gate and
// Done over 1M keys on a registry bounded to 10k breakers (switchboard) beside a plain map
// bounded to 10k keys, a miss deleting the oldest key and inserting the new one (map). The peers of the resilience behaviors (BenchmarkBreaker,
// BenchmarkFallbackRetryBreaker) run with make bench-all:
//
//	go test -run '^$' -bench . -skip '^BenchmarkDrain$' -benchmem -cpu 1,2
package benchmarks
