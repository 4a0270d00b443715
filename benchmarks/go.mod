module github.com/switchboard-go/switchboard/benchmarks

go 1.26.0

require (
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/samber/do/v2 v2.0.0
	github.com/sony/gobreaker/v2 v2.4.0
	github.com/switchboard-go/switchboard v0.0.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/samber/go-type-to-string v1.8.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.28.0 // indirect
)

replace github.com/switchboard-go/switchboard => ../
