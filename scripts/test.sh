#!/usr/bin/env bash
# Runs every test: the library with -race, then the peer benchmarks module's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
go vet ./...
go test -race -count=1 ./...
(cd benchmarks && go test -count=1 ./...)
