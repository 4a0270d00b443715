package maintenance

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/durable/internal/dbhealth"
)

// mover is a store whose MoveFinished calls move what moves gives for the call's number (none
// when it is not there); it prunes nothing.
type mover struct {
	moves map[int]int
	calls int
}

func (m *mover) Prune(context.Context, time.Time, time.Time) (int, bool, error) { return 0, false, nil }

func (m *mover) MoveFinished(context.Context) (int, bool, error) {
	n := m.moves[m.calls]
	m.calls++
	return n, false, nil
}

// TestPrunerLooksForFinishedItemsLessOftenWhileNoneCome: after a move that found none the
// pruner waits one pass, then two, four, up to 64 before it looks again (each look reads past
// every succeeded item that holds its dedupe key); a move that found some looks again at the
// next pass.
func TestPrunerLooksForFinishedItemsLessOftenWhileNoneCome(t *testing.T) {
	m := &mover{moves: map[int]int{0: 3, 7: 5}}
	p := NewPruner(PrunerConfig{Store: m, Clock: behaviors.SystemClock, Retention: -1,
		StoreContext: func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
		Health:       &dbhealth.Health{Log: zap.NewNop()}, Logger: zap.NewNop(), Stopping: func() bool { return false }})
	var looked []int
	for pass := range 220 {
		before := m.calls
		p.Pass()
		if m.calls > before {
			looked = append(looked, pass)
		}
	}
	want := []int{0, 1, 3, 6, 11, 20, 37, 70, 71, 73, 76, 81, 90, 107, 140, 205}
	if !slices.Equal(looked, want) {
		t.Errorf("moves looked for at passes %v, want %v", looked, want)
	}
}
