package breaker_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
)

const (
	missKeys = 1_000_000 // distinct keys cycled through
	missCap  = 10_000    // the registry's MaxBreakers, and the plain map's bound
)

// missKeyList is built once: the keys are the caller's, not part of what is measured.
var missKeyList = func() []string {
	keys := make([]string, missKeys)
	for i := range keys {
		keys[i] = "https://host-" + strconv.Itoa(i) + ".example/api"
	}
	return keys
}()

// BenchmarkBreakerKeyMiss is Gate and a successful Done on a registry capped at 10,000
// breakers, the keys cycling through 1,000,000: nearly every call is a miss that makes a breaker
// and, past the cap, evicts idle ones. "map" is the floor: a plain map bounded the same way,
// a miss deleting the oldest key and inserting the new one.
func BenchmarkBreakerKeyMiss(b *testing.B) {
	ctx := context.Background()
	b.Run("registry", func(b *testing.B) {
		reg := breaker.NewRegistry(breaker.Config{MaxBreakers: missCap})
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			p, err := reg.Gate(missKeyList[i])
			if err != nil {
				b.Fatal(err)
			}
			p.Done(ctx, nil)
			if i++; i == missKeys {
				i = 0
			}
		}
	})
	b.Run("map", func(b *testing.B) {
		m := make(map[string]*int, missCap)
		var ring [missCap]string
		vals := make([]int, missCap)
		i, slot := 0, 0
		b.ReportAllocs()
		for b.Loop() {
			k := missKeyList[i]
			if v, ok := m[k]; ok {
				*v++
			} else {
				if old := ring[slot]; old != "" {
					delete(m, old)
				}
				ring[slot] = k
				m[k] = &vals[slot]
				slot = (slot + 1) % missCap
			}
			if i++; i == missKeys {
				i = 0
			}
		}
	})
}
