package logging_test

import (
	"context"
	"reflect"
	"testing"
)

var (
	reflectTypeOfCall = reflect.TypeFor[*Call]()
	sinkAny           any
)

// BenchmarkSuccessDisabled is the success path with the logger at warn: the entry is checked
// and not built.
func BenchmarkSuccessDisabled(b *testing.B) {
	lb, next := disabledBehavior(b)
	ctx, req := context.Background(), &Call{}
	b.ReportAllocs()
	for b.Loop() {
		sinkAny, _ = lb.Handle(ctx, req, next)
	}
}

// BenchmarkBaseline is the same next called directly, for comparison.
func BenchmarkBaseline(b *testing.B) {
	_, next := disabledBehavior(b)
	ctx, req := context.Background(), &Call{}
	b.ReportAllocs()
	for b.Loop() {
		sinkAny, _ = next(ctx, req)
	}
}
