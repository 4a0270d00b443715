GO ?= go

.PHONY: test race bench lint cover demo fmt api

## test: every test of the module and of benchmarks/ (with -race); see scripts/test.sh
test:
	./scripts/test.sh

## race: the library's tests under the race detector, without the external services
race:
	$(GO) test -race -count=1 ./...

## bench: the library's benchmarks, then the side-by-side ones against peers in benchmarks/
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
	cd benchmarks && $(GO) test -run '^$$' -bench . -benchmem -cpu 1,2 ./...

## lint: gofmt, go vet and the module's naming rules (scripts/apicount)
lint:
	@test -z "$$(gofmt -l .)" || (gofmt -l . && exit 1)
	$(GO) vet ./...
	$(GO) run ./scripts/apicount -check
	cd benchmarks && $(GO) vet ./...

## cover: coverage profile of the library into cover.out
cover:
	$(GO) test -count=1 -coverprofile=cover.out ./...
	$(GO) tool cover -func=cover.out | tail -1

## api: exported-identifier count of each package
api:
	$(GO) run ./scripts/apicount

## demo: the main job on the embedded default, serving the admin dashboard until Ctrl-C
demo:
	$(GO) run ./examples/demo
