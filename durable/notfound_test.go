package durable_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
)

// Whatever a call names that does not exist (an item, an item token, a dead letter, a bulk
// action, a schedule), the error is one: it matches ErrNotFound, is a *NotFoundError saying
// what was not found, and leaks no database error.
func TestNotFoundIsOneError(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t, durable.Config{})
		calls := map[string]func() error{
			"item":        func() error { _, err := q.Item(ctx, 987654); return err },
			"item token":  func() error { _, err := q.ItemByToken(ctx, "nobody"); return err },
			"dead letter": func() error { _, _, err := q.DeadLetter(ctx, 987654); return err },
			"bulk action": func() error { _, err := q.BulkAction(ctx, 987654); return err },
			"schedule":    func() error { _, err := q.PauseSchedule(ctx, "gone", "ops", time.Time{}); return err },
		}
		for what, call := range calls {
			err := call()
			nf, ok := errors.AsType[*durable.NotFoundError](err)
			if !errors.Is(err, durable.ErrNotFound) || !ok || nf.What != what {
				t.Errorf("%s: %v (%T); want a *NotFoundError of %q matching ErrNotFound", what, err, err, what)
			}
		}
	})
}
