package durable_test

import (
	"context"
	"strings"
	"testing"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// refWork is a request that names its own reference.
type refWork struct {
	Work
	Ref string `json:"ref"`
}

func (r *refWork) Reference() string { return r.Ref }

// An item is found by the application's id: its reference (the option's or the request's
// own), its token, or its dedupe key; its dead letter is found with it, and a dead item by
// the dedupe key its letter keeps. Before, finding notification n-00168 took SQL on the
// payloads.
func TestFindByReferenceTokenAndDedupeKey(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		dead := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 1}, durable.WithReference("n-00168"), durable.WithDedupeKey("notify/ann")))
		again := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 2}, durable.WithReference("n-00168"), durable.WithToken("evt-9")))
		other := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 3}, durable.WithReference("n-00169")))
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			if w.N == 1 {
				return errPermanent
			}
			return nil
		}})
		start(t, e.q, m, durable.SchedulerConfig{})
		waitState(t, e.q, dead.ID, record.StateDead)
		waitState(t, e.q, again.ID, record.StateSucceeded)
		waitState(t, e.q, other.ID, record.StateSucceeded)

		ids := func(f durable.Found) (items []record.ItemID, letters []record.ItemID) {
			for _, it := range f.Items {
				items = append(items, it.ID)
			}
			for _, d := range f.DeadLetters {
				letters = append(letters, d.ItemID)
			}
			return items, letters
		}
		for _, c := range []struct {
			text           string
			items, letters []record.ItemID
		}{
			{"n-00168", []record.ItemID{again.ID, dead.ID}, []record.ItemID{dead.ID}},
			{"evt-9", []record.ItemID{again.ID}, nil},
			{"notify/ann", []record.ItemID{dead.ID}, []record.ItemID{dead.ID}},
			{dead.Token, []record.ItemID{dead.ID}, []record.ItemID{dead.ID}},
			{"n-0016", nil, nil}, // whole ids only
		} {
			f, err := e.q.Find(ctx, c.text)
			if err != nil {
				t.Fatalf("Find(%q): %v", c.text, err)
			}
			items, letters := ids(f)
			if !equalIDs(items, c.items) || !equalIDs(letters, c.letters) {
				t.Errorf("Find(%q): items %v letters %v; want %v and %v", c.text, items, letters, c.items, c.letters)
			}
		}
		it, err := e.q.Item(ctx, again.ID)
		if err != nil || it.Reference != "n-00168" {
			t.Errorf("the item's reference: %q (%v)", it.Reference, err)
		}
	})
}

func equalIDs(a, b []record.ItemID) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A request's own Reference() names the item's reference; the option overrides it.
func TestReferenceOfTheRequest(t *testing.T) {
	e := newEnv(t, sqliteBackend(t))
	ctx := context.Background()
	durable.Register[*refWork](e.q, "test.ref-work")
	own := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &refWork{Ref: "order-7"}))
	over := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &refWork{Ref: "order-8"}, durable.WithReference("order-9")))
	for id, want := range map[record.ItemID]string{own.ID: "order-7", over.ID: "order-9"} {
		if it, err := e.q.Item(ctx, id); err != nil || it.Reference != want {
			t.Errorf("item %d: reference %q (%v), want %q", id, it.Reference, err, want)
		}
	}
}

// A reference no database could store, and a search for nothing, are refused naming them;
// nothing is stored.
func TestReferenceBadInput(t *testing.T) {
	e := newEnv(t, sqliteBackend(t))
	ctx := context.Background()
	for _, ref := range []string{"a\x00b", "\xff", strings.Repeat("r", 1025), "  n-1 \n"} {
		_, err := e.q.Enqueue(ctx, &Work{N: 1}, durable.WithReference(ref))
		if err == nil || !strings.Contains(err.Error(), "the reference") || strings.Contains(err.Error(), "reference key") {
			t.Errorf("WithReference(%.20q): %v; want an error naming the reference (a reference is not a key)", ref, err)
		}
	}
	if page := must[durable.ItemPage](t)(e.q.Items(ctx, durable.ItemFilter{})); len(page.Items) != 0 {
		t.Errorf("%d items stored", len(page.Items))
	}
	for _, text := range []string{"", "  ", "a\x00b"} {
		if _, err := e.q.Find(ctx, text); err == nil {
			t.Errorf("Find(%q) answered", text)
		}
	}
}
