package record_test

import (
	"fmt"
	"testing"

	"go.uber.org/goleak"

	"github.com/switchboard-go/switchboard/durable/record"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// An item's counted attempts leave out those a shutdown interrupted and those abandoned in an
// instance that died running other items too: neither says the request failed.
func ExampleItem_Counted() {
	it := record.Item{State: record.StatePending, Attempts: 5, Interruptions: 1, Unattributed: 2}
	fmt.Println(it.State, it.Counted())
	// Output: pending 2
}

// Counted never counts an interruption or an unattributed crash against the policy.
func TestCountedLeavesOutWhatIsNotTheRequests(t *testing.T) {
	for _, c := range []struct{ attempts, interrupted, unattributed, want int }{
		{0, 0, 0, 0}, {3, 0, 0, 3}, {3, 3, 0, 0}, {4, 1, 1, 2},
	} {
		it := record.Item{Attempts: c.attempts, Interruptions: c.interrupted, Unattributed: c.unattributed}
		if got := it.Counted(); got != c.want {
			t.Errorf("%+v: Counted() = %d, want %d", c, got, c.want)
		}
	}
}
