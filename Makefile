GO ?= go

.PHONY: test race bench bench-docs bench-all chaos lint cover demo fmt api

## test: every test of the module and of benchmarks/ (with -race); see scripts/test.sh
test:
	./scripts/test.sh

## race: the library's tests under the race detector, without the external services
race:
	$(GO) test -race -count=1 ./...

# BENCH_COUNT runs of each benchmark (the tables show medians; 3 took 11 minutes on two cores
# under a load average of 10 to 14, most of it in the drains); BENCH_TIME per run of an
# in-process one.
BENCH_COUNT ?= 3
BENCH_TIME ?= 0.3s
BENCH_INPROC := ^Benchmark(DirectCall|Send|TypedSend|SendThreeBehaviors|StreamDirect|Stream|FallbackRetryBreaker|FallbackRetryBreakerTimeout|Breaker|BreakerParallel|RetryLoop|KeyedBreaker)$$
# The benchmarks of one iteration each (-benchtime 1x): the drains, the idle fleets, the pickups.
BENCH_DB := ^Benchmark(Drain|DrainBesideFinished|IdleFleet|FleetPickup)$$
# Package durable's benchmarks of the fair claim: the claim at depth (SWITCHBOARD_BENCH_DEEP=1
# adds 10 million pending and 50 million finished items on PostgreSQL) and a recovered
# endpoint's backlog beside other keys' load.
BENCH_FAIR := ^Benchmark(ClaimDepth|RecoveredEndpoint)$$

## bench: the comparison tables of benchmarks/ (see benchmarks/doc.go): the durable drain of
## switchboard beside River and the bare-SQL floor on PostgreSQL (SWITCHBOARD_TEST_PG_DSN; its
## rows are skipped without it, except under CI=true) and SQLite, and through PgBouncer
## (SWITCHBOARD_TEST_PGBOUNCER_DSN, likewise), and beside a million finished items; what an idle fleet of 1, 10 and 50 instances costs
## the database and the pickup across instances, directly and through PgBouncer; then Send,
## Stream, the resilience stack, the breakers and the retry loops beside their baselines and
## peers, with the load average at start and end. The raw go test output, with the machine and command of
## the run, stays in benchmarks/.bench.out; bench-docs then writes docs/benchmarks.md and its
## charts from it. The library's own benchmarks are not run: see bench-all.
bench:
	@test -n "$$SWITCHBOARD_TEST_PG_DSN" || echo "bench: SWITCHBOARD_TEST_PG_DSN not set: the PostgreSQL rows are skipped"
	cd benchmarks && $(GO) test -c -o .bench.test . && $(GO) build -o .benchtable ./cmd/benchtable && \
		$(GO) build -o .benchdocs ./cmd/benchdocs
	cd benchmarks && { ./.benchdocs -meta start -command 'make bench BENCH_COUNT=$(BENCH_COUNT) BENCH_TIME=$(BENCH_TIME)' && \
		./.bench.test -test.run '^$$' -test.bench '$(BENCH_DB)' -test.benchtime 1x \
		-test.count $(BENCH_COUNT) -test.timeout 45m && \
		(cd .. && $(GO) test -run '^$$' -bench '$(BENCH_FAIR)' -count $(BENCH_COUNT) -timeout 120m ./durable) && \
		./.bench.test -test.run '^$$' -test.bench '$(BENCH_INPROC)' -test.benchtime $(BENCH_TIME) -test.benchmem \
		-test.count $(BENCH_COUNT) && ./.benchdocs -meta end; } 2>&1 | tee .bench.out | ./.benchtable
	$(MAKE) --no-print-directory bench-docs

## bench-docs: docs/benchmarks.md and its charts (docs/benchmarks/*.svg) from the output of the
## last make bench, benchmarks/.bench.out (see benchmarks/cmd/benchdocs)
bench-docs:
	cd benchmarks && $(GO) run ./cmd/benchdocs -in .bench.out -out ../docs

## bench-all: every benchmark, without the table: the library's own, then all of benchmarks/
## (the peers at -cpu 1,2, then the drains, the idle fleets and the pickups, one iteration each)
bench-all:
	$(GO) test -run '^$$' -bench . -benchmem ./...
	cd benchmarks && $(GO) test -run '^$$' -bench . -skip '$(BENCH_DB)' -benchmem -cpu 1,2 ./...
	cd benchmarks && $(GO) test -run '^$$' -bench '$(BENCH_DB)' -benchtime 1x -timeout 45m ./...

# CHAOS_PROFILE short divides every duration of the method (chaos scenarios by 6, pressure cells
# by 120): about 20 minutes for both systems on two cores. long runs the method's durations
# (hours).
CHAOS_PROFILE ?= short

## chaos: the chaos and pressure scorecard of switchboard beside River (benchmarks/cmd/chaos) on a
## PostgreSQL server of its own with durable settings (scripts/with-postgres.sh), which its
## postgres-restart scenario stops and starts; the scorecard and its charts go into docs/benchmarks.md
## (its chaos section, docs/benchmarks/chaos), each scenario's phases to docs/chaos.md
chaos:
	cd benchmarks && $(GO) build -o .chaos ./cmd/chaos && $(GO) build -o .chaosreplica ./cmd/chaosreplica
	env -u SWITCHBOARD_TEST_PG_DSN SWITCHBOARD_PG_DURABLE=1 SWITCHBOARD_PG_MAX_CONNECTIONS=200 \
		./scripts/with-postgres.sh sh -c 'cd benchmarks && ./.chaos -dsn "$$SWITCHBOARD_TEST_PG_DSN" \
		-replica ./.chaosreplica -pgdata "$$SWITCHBOARD_TEST_PGDATA" -pgctl "$$SWITCHBOARD_TEST_PGCTL" \
		-profile $(CHAOS_PROFILE) -out .chaos.md -docs ../docs/chaos.md \
		-page ../docs/benchmarks.md -charts ../docs/benchmarks/chaos'

## lint: gofmt, go vet and the module's naming rules (scripts/apicount)
lint:
	@test -z "$$(gofmt -l .)" || (gofmt -l . && exit 1)
	$(GO) vet ./...
	$(GO) run ./scripts/apicount -check
	./scripts/filesize.sh
	cd benchmarks && $(GO) vet ./...

## cover: coverage profile of the library into cover.out
cover:
	$(GO) test -count=1 -coverprofile=cover.out ./...
	$(GO) tool cover -func=cover.out | tail -1

## api: exported-identifier count of each package
api:
	$(GO) run ./scripts/apicount

## demo: the main job on the embedded default (examples/demo): an outbound dispatcher for a
## minute, then its summary and the admin dashboard until Ctrl-C; DEMO_FLAGS="-duration 20s -quit"
## for a shorter run that exits
demo:
	@echo "demo: building examples/demo; the first build also compiles the embedded SQLite (pure Go) and takes about a minute, later ones seconds"
	@$(GO) run ./examples/demo $(DEMO_FLAGS)
