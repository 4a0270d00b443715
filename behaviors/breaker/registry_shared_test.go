package breaker_test

import (
	"testing"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
)

// A registry says whether it shares its state with a fleet: the admin tells an operator that a
// trip of one that does not changes one instance's breaker alone.
func TestRegistrySaysWhetherItIsShared(t *testing.T) {
	if breaker.NewRegistry(breaker.Config{}).Shared() {
		t.Error("a registry without a store says it is shared")
	}
	if !breaker.NewRegistry(breaker.Config{Store: newMemStore(&stepClock{})}).Shared() {
		t.Error("a registry with a store says it is not shared")
	}
}
