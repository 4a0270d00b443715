package maintenance

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/durable/internal/dbhealth"
	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// mover is a store whose MoveFinished calls move what moves gives for the call's number (none
// when it is not there), and answer busy or fail on the calls busy and fail name; it prunes
// nothing.
type mover struct {
	moves      map[int]int
	busy, fail map[int]bool
	calls      int
}

func (m *mover) Prune(context.Context, time.Time, time.Time) (int, bool, error) { return 0, false, nil }

func (m *mover) MoveFinished(context.Context) (int, bool, error) {
	c := m.calls
	m.calls++
	if m.fail[c] {
		return 0, false, errors.New("the database is gone")
	}
	return m.moves[c], m.busy[c], nil
}

// passes runs n passes of a pruner of m and returns how many moves each called.
func passes(m *mover, n int) []int {
	p := NewPruner(PrunerConfig{Store: m, Clock: behaviors.SystemClock, Retention: -1,
		StoreContext: func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
		Health:       &dbhealth.Health{Log: zap.NewNop()}, Logger: zap.NewNop(), Stopping: func() bool { return false }})
	calls := make([]int, n)
	for pass := range n {
		before := m.calls
		p.Pass()
		calls[pass] = m.calls - before
	}
	return calls
}

// TestPrunerLooksForFinishedItemsLessOftenWhileNoneCome: after a move that found none the
// pruner waits one pass, then two, four, up to 64 before it looks again (each look reads past
// every succeeded item that holds its dedupe key); a move that found some looks again at the
// next pass.
func TestPrunerLooksForFinishedItemsLessOftenWhileNoneCome(t *testing.T) {
	var looked []int
	for pass, n := range passes(&mover{moves: map[int]int{0: 3, 7: 5}}, 220) {
		if n > 0 {
			looked = append(looked, pass)
		}
	}
	want := []int{0, 1, 3, 6, 11, 20, 37, 70, 71, 73, 76, 81, 90, 107, 140, 205}
	if !slices.Equal(looked, want) {
		t.Errorf("moves looked for at passes %v, want %v", looked, want)
	}
}

// A full batch is followed by another in the same pass; a move another instance's lock held off
// (busy) or the database failed says nothing of what is left, and the wait stays as it was.
func TestPrunerMovesWhileBatchesAreFullAndWaitsOnlyAfterAnEmptyLook(t *testing.T) {
	m := &mover{moves: map[int]int{0: store.PruneBatch, 1: 2}, busy: map[int]bool{2: true}, fail: map[int]bool{3: true}}
	got := passes(m, 8)
	// Pass 0: a full batch, then 2; 1: busy; 2: failed; 3: none (the wait becomes 1);
	// 4: waited; 5: none (2); 6 and 7: waited.
	if want := []int{2, 1, 1, 1, 0, 1, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("moves called per pass %v, want %v", got, want)
	}
}
