#!/usr/bin/env bash
# Runs every test: the library with -race, then the tests the race detector makes too slow for a
# small machine (fifty instance processes) without it, then the peer benchmarks module's tests.
# Both run under scripts/with-postgres.sh, so the PostgreSQL suites (the durable package's, the
# benchmarks' harness check) run against SWITCHBOARD_TEST_PG_DSN when it is set, or else against
# a throwaway server started for the run and removed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
go vet ./...
go run ./scripts/apicount -check
./scripts/filesize.sh
./scripts/with-postgres.sh go test -race -count=1 -timeout 25m ./...
./scripts/with-postgres.sh go test -count=1 -timeout 10m -run '^TestFleetFiftyInstances$' ./durable/
(cd benchmarks && ../scripts/with-postgres.sh go test -count=1 ./...)
