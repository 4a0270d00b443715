package durable_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
	istore "github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// dlEnv is an env whose Work handler is the test's fn.
type dlEnv struct {
	*env
	m     *mediator.Mediator
	runs  atomic.Int64
	mu    sync.Mutex
	fn    func(ctx context.Context, w *Work) error
	dead  []record.DeadLetter // OnDead calls
	clock *fakeClock
}

func newDLEnv(t *testing.T, b backend, cfg durable.Config) *dlEnv {
	t.Helper()
	e := &dlEnv{clock: newFakeClock()}
	cfg.Policy, cfg.Clock, cfg.Rand = fastPolicy, e.clock, func() float64 { return 0.5 }
	if cfg.OnDead == nil {
		cfg.OnDead = []func(context.Context, record.DeadLetter){func(_ context.Context, d record.DeadLetter) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.dead = append(e.dead, d)
		}}
	}
	q := b.queue(t, cfg)
	e.env = &env{store: durable.StoreOf(q), q: q, clock: e.clock}
	e.m = mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
		e.runs.Add(1)
		e.mu.Lock()
		fn := e.fn
		e.mu.Unlock()
		if fn == nil {
			return nil
		}
		return fn(ctx, w)
	}})
	return e
}

func (e *dlEnv) handle(fn func(ctx context.Context, w *Work) error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fn = fn
}

func (e *dlEnv) onDead() []record.DeadLetter {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]record.DeadLetter(nil), e.dead...)
}

// capture makes n dead letters of source through RunBatch, with a handler that fails every
// item, and returns their ids; item i is Work{N: i} with key "k<i>".
func (e *dlEnv) capture(t *testing.T, source string, n int) []record.DeadLetterID {
	t.Helper()
	e.handle(func(_ context.Context, w *Work) error { return fmt.Errorf("bad record %d", w.N) })
	items := make([]durable.BatchItem, n)
	for i := range items {
		items[i] = durable.BatchItem{Key: fmt.Sprintf("k%d", i), Request: &Work{N: i}}
	}
	res, err := e.q.RunBatch(context.Background(), e.m, source, items)
	if err != nil {
		t.Fatal(err)
	}
	if res.Invalid != n || len(res.DeadLetters) != n {
		t.Fatalf("capture: %+v", res)
	}
	e.handle(nil)
	return res.DeadLetters
}

func (e *dlEnv) letter(t *testing.T, id record.DeadLetterID) (record.DeadLetter, []record.TimelineEntry) {
	t.Helper()
	d, tl, err := e.q.DeadLetter(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d, tl
}

func timeline(tl []record.TimelineEntry) string {
	var parts []string
	for _, x := range tl {
		s := string(x.Kind)
		if x.Outcome != "" {
			s += ":" + string(x.Outcome)
		}
		if x.Actor != "" {
			s += "/" + x.Actor
		}
		if x.Error != "" {
			s += "(" + x.Error + ")"
		}
		if x.Reason != "" {
			s += "[" + x.Reason + "]"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func rowCount(t *testing.T, e *dlEnv, table string) int {
	t.Helper()
	var n int
	if err := e.store.DB().QueryRow("SELECT COUNT(*) FROM " + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A dead item becomes a dead letter; a replay that fails leaves it failed with one more replay
// event and a retry count one higher; one that succeeds makes it replayed; after that it is a
// conflict.
func TestReplayFailureThenSuccess(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		e := newDLEnv(t, b, durable.Config{})
		e.handle(func(context.Context, *Work) error { return errPermanent })
		enq := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 7}, durable.WithDedupeKey("order-7")))
		if r := durabletest.Work(ctx, t, e.q, e.m); r.Dead != 1 {
			t.Fatalf("work: %v", r)
		}
		lp, err := e.q.DeadLetters(ctx, durable.DeadLetterFilter{})
		letters, total := lp.Letters, lp.Total
		if err != nil || total != 1 || len(letters) != 1 {
			t.Fatalf("letters %+v total %d err %v", letters, total, err)
		}
		d := letters[0]
		if d.ItemID != enq.ID || d.Source != "test.work" || d.Name != "test.work" || d.Key != "order-7" ||
			d.Error != errPermanent.Error() || d.Status != record.DeadLetterFailed || d.RetryCount != 0 || string(d.Payload) != `{"n":7}` {
			t.Fatalf("letter %+v", d)
		}
		if it := item(t, e.q, enq.ID); it.State != record.StateDead {
			t.Fatalf("item %+v", it)
		}

		stillBroken := errors.New("still broken")
		e.handle(func(context.Context, *Work) error { return stillBroken })
		res, err := e.q.Replay(ctx, e.m, d.ID, "alice")
		if res != durable.StillFailed || !errors.Is(err, stillBroken) {
			t.Fatalf("replay: %v, %v", res, err)
		}
		got, tl := e.letter(t, d.ID)
		if got.Status != record.DeadLetterFailed || got.RetryCount != 1 || got.Error != "still broken" {
			t.Fatalf("after a failed replay: %+v", got)
		}
		if want := "attempt:failed(permanent failure) replay:failed/alice(still broken)"; timeline(tl) != want {
			t.Fatalf("timeline %q, want %q", timeline(tl), want)
		}

		e.handle(nil)
		e.clock.Advance(time.Second)
		if res, err := e.q.Replay(ctx, e.m, d.ID, "bob"); res != durable.Replayed || err != nil {
			t.Fatalf("replay: %v, %v", res, err)
		}
		got, tl = e.letter(t, d.ID)
		if got.Status != record.DeadLetterReplayed || got.RetryCount != 2 || !got.UpdatedAt.Equal(e.clock.Now()) {
			t.Fatalf("after a replay: %+v", got)
		}
		if want := "attempt:failed(permanent failure) replay:failed/alice(still broken) replay:succeeded/bob"; timeline(tl) != want {
			t.Fatalf("timeline %q, want %q", timeline(tl), want)
		}
		if e.runs.Load() != 3 {
			t.Fatalf("handler ran %d times, want 3", e.runs.Load())
		}
		if res, err := e.q.Replay(ctx, e.m, d.ID, "bob"); res != durable.Conflict || !errors.Is(err, durable.ErrConflict) {
			t.Fatalf("replay of a replayed letter: %v, %v", res, err)
		}
		if res, err := e.q.Discard(ctx, d.ID, "bob", "done"); res != durable.Conflict || !errors.Is(err, durable.ErrConflict) {
			t.Fatalf("discard of a replayed letter: %v, %v", res, err)
		}
		if res, err := e.q.Replay(ctx, e.m, d.ID+1000, "bob"); res != durable.NotFound || !errors.Is(err, durable.ErrNotFound) {
			t.Fatalf("replay of an unknown letter: %v, %v", res, err)
		}
		if e.runs.Load() != 3 {
			t.Fatalf("handler ran %d times, want 3", e.runs.Load())
		}
		if _, err := e.q.Replay(ctx, e.m, d.ID, ""); err == nil || !strings.Contains(err.Error(), "actor") {
			t.Fatalf("replay without actor: %v", err)
		}
	})
}

// A replay whose caller gives up while its handler runs is not a failure: the letter stays
// failed with its retry count, free again, and its timeline shows the replay as abandoned,
// outcome unknown, since the handler may have had effects.
func TestReplayCancelledIsNotAFailure(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newDLEnv(t, b, durable.Config{})
		id := e.capture(t, "sync", 1)[0]
		ctx, cancel := context.WithCancel(context.Background())
		e.handle(func(ctx context.Context, _ *Work) error {
			cancel()
			<-ctx.Done()
			return ctx.Err()
		})
		res, err := e.q.Replay(ctx, e.m, id, "alice")
		if res != "" || !errors.Is(err, context.Canceled) {
			t.Fatalf("replay: %v, %v", res, err)
		}
		d, tl := e.letter(t, id)
		if d.Status != record.DeadLetterFailed || d.RetryCount != 0 || len(tl) != 1 ||
			tl[0].Kind != record.TimelineReplay || tl[0].Outcome != "abandoned" || tl[0].Actor != "alice" ||
			!strings.HasPrefix(tl[0].Error, "outcome unknown: the replay's caller gave up") {
			t.Fatalf("after a cancelled replay: %+v %q", d, timeline(tl))
		}
		e.handle(nil)
		if res, err := e.q.Replay(context.Background(), e.m, id, "alice"); res != durable.Replayed || err != nil {
			t.Fatalf("replay after a cancelled one: %v, %v", res, err)
		}
	})
}

// Discard is terminal, audited and deletes nothing.
func TestDiscardAuditedRowKept(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		e := newDLEnv(t, b, durable.Config{})
		ids := e.capture(t, "sync", 3)
		before := rowCount(t, e, "switchboard_dead_letters")
		if before != 3 {
			t.Fatalf("%d rows", before)
		}
		if _, err := e.q.Discard(ctx, ids[0], "", "bad data"); err == nil || !strings.Contains(err.Error(), "actor is required") {
			t.Fatalf("discard without actor: %v", err)
		}
		if _, err := e.q.Discard(ctx, ids[0], "alice", ""); err == nil || !strings.Contains(err.Error(), "reason is required") {
			t.Fatalf("discard without reason: %v", err)
		}
		e.clock.Advance(time.Minute)
		if res, err := e.q.Discard(ctx, ids[0], "alice", "customer deleted"); res != durable.Discarded || err != nil {
			t.Fatalf("discard: %v, %v", res, err)
		}
		if res, err := e.q.Discard(ctx, ids[0], "alice", "again"); res != durable.Conflict || !errors.Is(err, durable.ErrConflict) {
			t.Fatalf("second discard: %v, %v", res, err)
		}
		if res, err := e.q.Replay(ctx, e.m, ids[0], "alice"); res != durable.Conflict || !errors.Is(err, durable.ErrConflict) {
			t.Fatalf("replay of a discarded letter: %v, %v", res, err)
		}
		if res, err := e.q.Discard(ctx, ids[2]+100, "alice", "x"); res != durable.NotFound || !errors.Is(err, durable.ErrNotFound) {
			t.Fatalf("discard of an unknown letter: %v, %v", res, err)
		}
		if after := rowCount(t, e, "switchboard_dead_letters"); after != before {
			t.Fatalf("%d rows after the discard, %d before", after, before)
		}
		d, tl := e.letter(t, ids[0])
		if d.Status != record.DeadLetterDiscarded || d.Key != "k0" || d.Error != "bad record 0" {
			t.Fatalf("discarded letter %+v", d)
		}
		if want := "discard/alice[customer deleted]"; timeline(tl) != want || !tl[0].EndedAt.Equal(e.clock.Now()) {
			t.Fatalf("timeline %q (%+v), want %q", timeline(tl), tl, want)
		}
		lp, err := e.q.DeadLetters(ctx, durable.DeadLetterFilter{Source: "sync"})
		failed, total := lp.Letters, lp.Total
		if err != nil || total != 2 || len(failed) != 2 || failed[0].ID != ids[2] || failed[1].ID != ids[1] {
			t.Fatalf("failed letters %+v total %d err %v", failed, total, err)
		}
		lp, err = e.q.DeadLetters(ctx, durable.DeadLetterFilter{Status: record.DeadLetterDiscarded})
		discarded, total := lp.Letters, lp.Total
		if err != nil || total != 1 || discarded[0].ID != ids[0] {
			t.Fatalf("discarded letters %+v total %d err %v", discarded, total, err)
		}
		if _, err := e.q.DeadLetters(ctx, durable.DeadLetterFilter{Limit: 501, Offset: -1, Status: "gone"}); err == nil ||
			!strings.Contains(err.Error(), "Limit 501") || !strings.Contains(err.Error(), "Offset -1") || !strings.Contains(err.Error(), `Status "gone"`) {
			t.Fatalf("invalid filter: %v", err)
		}
	})
}

// Listing pages, and filters by source and creation time.
func TestDeadLettersListing(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		e := newDLEnv(t, b, durable.Config{})
		start := e.clock.Now()
		var ids []record.DeadLetterID
		for range 5 {
			ids = append(ids, e.capture(t, "a", 1)...)
			e.clock.Advance(time.Minute)
		}
		e.capture(t, "b", 2)
		lp, err := e.q.DeadLetters(ctx, durable.DeadLetterFilter{Source: "a", Limit: 2, Offset: 1})
		page, total := lp.Letters, lp.Total
		if err != nil || total != 5 || len(page) != 2 || page[0].ID != ids[3] || page[1].ID != ids[2] {
			t.Fatalf("page %+v total %d err %v", page, total, err)
		}
		lp, err = e.q.DeadLetters(ctx, durable.DeadLetterFilter{From: start.Add(time.Minute), To: start.Add(3 * time.Minute)})
		window, total := lp.Letters, lp.Total
		if err != nil || total != 2 || window[0].ID != ids[2] || window[1].ID != ids[1] {
			t.Fatalf("window %+v total %d err %v", window, total, err)
		}
		lp, err = e.q.DeadLetters(ctx, durable.DeadLetterFilter{})
		all, total := lp.Letters, lp.Total
		if err != nil || total != 7 || len(all) != 7 {
			t.Fatalf("all: %d of %d, %v", len(all), total, err)
		}
	})
}

// The listing's total is counted up to the count limit or the page's end, whichever is
// further, and says when more match (Over): a later page is still listed, and a page past the
// letters says where they end.
func TestDeadLettersTotalStopsAtItsBound(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		e := newDLEnv(t, b, durable.Config{})
		durable.SetCountLimit(e.q, 3)
		e.capture(t, "a", 8)
		e.capture(t, "b", 2)
		for _, c := range []struct {
			f           durable.DeadLetterFilter
			letters     int
			total       int
			over        bool
			description string
		}{
			{durable.DeadLetterFilter{Limit: 2}, 2, 3, true, "the first page: counted up to the limit"},
			{durable.DeadLetterFilter{Limit: 2, Offset: 4}, 2, 6, true, "a page past the limit: counted to its end"},
			{durable.DeadLetterFilter{Limit: 5, Offset: 6}, 4, 10, false, "the last page: all counted"},
			{durable.DeadLetterFilter{Limit: 5, Offset: 12}, 0, 10, false, "past the end"},
			{durable.DeadLetterFilter{Source: "b"}, 2, 2, false, "a source under the limit"},
			{durable.DeadLetterFilter{Source: "a", Limit: 8}, 8, 8, false, "exactly to the page's end"},
			{durable.DeadLetterFilter{Source: "a", Offset: math.MaxInt - 1}, 0, 8, false, "an offset at the end of int: all counted, no overflow"},
		} {
			page, err := e.q.DeadLetters(ctx, c.f)
			if err != nil || len(page.Letters) != c.letters || page.Total != c.total || page.Over != c.over {
				t.Errorf("%s (%+v): %d letters, total %d, over %v, %v; want %d, %d, %v", c.description, c.f,
					len(page.Letters), page.Total, page.Over, err, c.letters, c.total, c.over)
			}
		}
	})
}

// A filter the database cannot take is refused, each problem named, rather than answered with
// the database's own error (a NUL byte), no letters (invalid UTF-8, a time that overflows the
// stored microseconds) or an empty range; a bulk action's filter alike.
func TestDeadLettersRefuseWhatTheDatabaseCannotTake(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		e := newDLEnv(t, b, durable.Config{})
		e.capture(t, "a", 1)
		at := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
		for _, c := range []struct {
			f    durable.DeadLetterFilter
			want []string
		}{
			{durable.DeadLetterFilter{ErrorContains: "a\x00b", Source: "s\x00"}, []string{`ErrorContains "a\x00b" holds a NUL byte`, `Source "s\x00" holds a NUL byte`}},
			{durable.DeadLetterFilter{ErrorContains: "a\xffb"}, []string{`ErrorContains "a\xffb" is not valid UTF-8`}},
			{durable.DeadLetterFilter{From: at, To: at}, []string{"From 2027-01-01T00:00:00Z is not before "}},
			{durable.DeadLetterFilter{To: time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)}, []string{"To 300000-01-01T00:00:00Z is not between the years 1 and 9999"}},
			{durable.DeadLetterFilter{From: time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC)}, []string{"From 0000-12-31T00:00:00Z is not between the years 1 and 9999"}},
		} {
			_, err := e.q.DeadLetters(ctx, c.f)
			for _, w := range c.want {
				if err == nil || !strings.Contains(err.Error(), w) || !strings.Contains(err.Error(), "invalid filter") {
					t.Errorf("DeadLetters(%+v) = %v, want an invalid filter naming %s", c.f, err, w)
				}
			}
			_, err = e.q.StartBulkAction(ctx, durable.BulkActionSpec{Kind: record.BulkReplay, Filter: c.f}, "alice")
			for _, w := range c.want {
				if err == nil || !strings.Contains(err.Error(), "Filter."+w) {
					t.Errorf("StartBulkAction(filter %+v) = %v, want an error naming Filter.%s", c.f, err, w)
				}
			}
		}
		page, err := e.q.DeadLetters(ctx, durable.DeadLetterFilter{From: time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC), To: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)})
		if err != nil || len(page.Letters) != 1 {
			t.Errorf("the widest range: %d letters, %v; want the letter", len(page.Letters), err)
		}
	})
}

// A bulk of 100 reports every outcome per id, in order, and one failure stops nothing.
func TestBulkMixedOutcomes(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		e := newDLEnv(t, b, durable.Config{})
		ids := e.capture(t, "bulk", 90)
		for _, id := range ids[70:] {
			if res, err := e.q.Discard(ctx, id, "alice", "obsolete"); res != durable.Discarded || err != nil {
				t.Fatal(res, err)
			}
		}
		e.handle(func(_ context.Context, w *Work) error {
			if w.N >= 40 {
				return fmt.Errorf("still bad %d", w.N)
			}
			return nil
		})
		replay := append([]record.DeadLetterID(nil), ids[:70]...)
		replay = append(replay, ids[70:]...)
		for i := range 10 {
			replay = append(replay, ids[89]+record.DeadLetterID(1000+i))
		}
		e.runs.Store(0)
		results, err := e.q.ReplayMany(ctx, e.m, replay, "ops")
		if err != nil || len(results) != 100 {
			t.Fatalf("%d results, %v", len(results), err)
		}
		for i, r := range results {
			want := durable.Replayed
			switch {
			case i >= 90:
				want = durable.NotFound
			case i >= 70:
				want = durable.Conflict
			case i >= 40:
				want = durable.StillFailed
			}
			if r.ID != replay[i] || r.Resolution != want || (want == durable.Replayed) != (r.Error == "") {
				t.Fatalf("result %d: %+v, want %s", i, r, want)
			}
			if want == durable.StillFailed && r.Error != fmt.Sprintf("still bad %d", i) {
				t.Fatalf("result %d: %+v", i, r)
			}
		}
		if e.runs.Load() != 70 {
			t.Fatalf("handler ran %d times, want 70", e.runs.Load())
		}
		discard := append([]record.DeadLetterID(nil), ids[40:70]...)
		discard = append(discard, ids[:40]...)
		for i := range 30 {
			discard = append(discard, ids[89]+record.DeadLetterID(2000+i))
		}
		results, err = e.q.DiscardMany(ctx, discard, "ops", "cleanup")
		if err != nil || len(results) != 100 {
			t.Fatalf("%d results, %v", len(results), err)
		}
		for i, r := range results {
			want := durable.Discarded
			switch {
			case i >= 70:
				want = durable.NotFound
			case i >= 30:
				want = durable.Conflict
			}
			if r.ID != discard[i] || r.Resolution != want {
				t.Fatalf("result %d: %+v, want %s", i, r, want)
			}
		}
		st := stats(t, e.q)
		want := map[record.DeadLetterStatus]int{record.DeadLetterFailed: 0, record.DeadLetterReplayed: 40, record.DeadLetterDiscarded: 50}
		if fmt.Sprint(st.DeadLetters) != fmt.Sprint(want) {
			t.Fatalf("stats %v, want %v", st.DeadLetters, want)
		}
		if n := rowCount(t, e, "switchboard_dead_letters"); n != 90 {
			t.Fatalf("%d letters", n)
		}
		if n := rowCount(t, e, "switchboard_dead_letter_events"); n != 20+70+30 {
			t.Fatalf("%d events", n)
		}
	})
}

// More than 100 ids is refused before anything runs.
func TestBulkTooMany(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		e := newDLEnv(t, b, durable.Config{})
		ids := e.capture(t, "bulk", 101)
		e.runs.Store(0)
		results, err := e.q.ReplayMany(ctx, e.m, ids, "ops")
		if !errors.Is(err, durable.ErrTooMany) || results != nil || !strings.Contains(err.Error(), "101 ids") {
			t.Fatalf("replay of 101: %v, %v", results, err)
		}
		results, err = e.q.DiscardMany(ctx, ids, "ops", "cleanup")
		if !errors.Is(err, durable.ErrTooMany) || results != nil {
			t.Fatalf("discard of 101: %v, %v", results, err)
		}
		if e.runs.Load() != 0 {
			t.Fatalf("handler ran %d times", e.runs.Load())
		}
		if st := stats(t, e.q); st.DeadLetters[record.DeadLetterFailed] != 101 {
			t.Fatalf("stats %v", st.DeadLetters)
		}
		if n := rowCount(t, e, "switchboard_dead_letter_events"); n != 0 {
			t.Fatalf("%d events", n)
		}
		// A repeated id would replay its letter twice: refused before anything runs.
		if results, err := e.q.ReplayMany(ctx, e.m, []record.DeadLetterID{ids[0], ids[1], ids[0]}, "ops"); err == nil ||
			!strings.Contains(err.Error(), "appears more than once") || results != nil || e.runs.Load() != 0 {
			t.Fatalf("repeated id: %v, %v, %d runs", results, err, e.runs.Load())
		}
		if results, err := e.q.ReplayMany(ctx, e.m, ids[:100], "ops"); err != nil || len(results) != 100 {
			t.Fatalf("replay of 100: %d results, %v", len(results), err)
		}
	})
}

// Two concurrent replays of one letter: the handler runs once, the other replay is a conflict.
func TestConcurrentReplayRunsOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		e := newDLEnv(t, b, durable.Config{})
		id := e.capture(t, "sync", 1)[0]
		release := make(chan struct{})
		e.runs.Store(0)
		e.handle(func(context.Context, *Work) error {
			<-release
			return nil
		})
		type outcome struct {
			res durable.Resolution
			err error
		}
		results := make(chan outcome, 2)
		go0 := make(chan struct{})
		for range 2 {
			go func() {
				<-go0
				res, err := e.q.Replay(ctx, e.m, id, "ops")
				results <- outcome{res, err}
			}()
		}
		close(go0)
		first := <-results // the winner waits in its handler until release
		if first.res != durable.Conflict || !errors.Is(first.err, durable.ErrConflict) || !strings.Contains(first.err.Error(), "being replayed") {
			t.Fatalf("first result: %v, %v", first.res, first.err)
		}
		close(release)
		second := <-results
		if second.res != durable.Replayed || second.err != nil {
			t.Fatalf("second result: %v, %v", second.res, second.err)
		}
		if e.runs.Load() != 1 {
			t.Fatalf("handler ran %d times", e.runs.Load())
		}
		d, tl := e.letter(t, id)
		if d.Status != record.DeadLetterReplayed || d.RetryCount != 1 || len(tl) != 1 {
			t.Fatalf("letter %+v, timeline %q", d, timeline(tl))
		}
	})
}

// A replay lease whose holder died blocks the letter until it runs out, then frees it, and the
// replay that never finished is in the timeline as abandoned (it used to leave no trace).
func TestExpiredReplayLeaseFreesLetter(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		e := newDLEnv(t, b, durable.Config{ReplayLease: 2 * time.Minute})
		id := e.capture(t, "sync", 1)[0]
		now := leaseToADeadProcess(t, e, id)
		e.runs.Store(0)
		if res, err := e.q.Replay(ctx, e.m, id, "ops"); res != durable.Conflict || !errors.Is(err, durable.ErrConflict) {
			t.Fatalf("replay under a live lease: %v, %v", res, err)
		}
		if res, err := e.q.Discard(ctx, id, "ops", "x"); res != durable.Conflict || !errors.Is(err, durable.ErrConflict) {
			t.Fatalf("discard under a live lease: %v, %v", res, err)
		}
		e.clock.Advance(2*time.Minute - time.Microsecond)
		if res, _ := e.q.Replay(ctx, e.m, id, "ops"); res != durable.Conflict {
			t.Fatalf("replay just before the lease runs out: %v", res)
		}
		e.clock.Advance(time.Microsecond)
		if res, err := e.q.Replay(ctx, e.m, id, "ops"); res != durable.Replayed || err != nil {
			t.Fatalf("replay after the lease ran out: %v, %v", res, err)
		}
		if e.runs.Load() != 1 {
			t.Fatalf("handler ran %d times", e.runs.Load())
		}
		// The dead process's late outcome is refused.
		ok, err := e.store.FinishReplay(ctx, istore.DeadLetterID(id), "dead-process", false, istore.Event{Kind: istore.EventReplay, Actor: "x",
			Outcome: istore.OutcomeStillFailed, Error: "late", StartedAt: now, EndedAt: now})
		if err != nil || ok {
			t.Fatalf("late finish: %v, %v", ok, err)
		}
		// The dead replay is in the timeline, abandoned, by its actor, before the one that ran.
		d, tl := e.letter(t, id)
		if d.Status != record.DeadLetterReplayed || d.RetryCount != 1 || len(tl) != 2 ||
			tl[0].Kind != record.TimelineReplay || tl[0].Outcome != "abandoned" || tl[0].Actor != "alice" ||
			!tl[0].StartedAt.Equal(now) || !tl[0].EndedAt.Equal(now.Add(2*time.Minute)) ||
			tl[1].Outcome != "succeeded" || tl[1].Actor != "ops" {
			t.Fatalf("letter %+v, timeline %q", d, timeline(tl))
		}
	})
}

// leaseToADeadProcess takes a two-minute replay lease on letter id for alice, as a process that
// then died would have, and returns when it was taken.
func leaseToADeadProcess(t *testing.T, e *dlEnv, id record.DeadLetterID) time.Time {
	t.Helper()
	now := e.clock.Now()
	_, res, err := e.store.LeaseReplay(context.Background(), istore.DeadLetterID(id), "dead-process", "alice", now, now.Add(2*time.Minute))
	if err != nil || res != istore.Done {
		t.Fatal(res, err)
	}
	return now
}

// A letter discarded after a replay's lease ran out unrecorded keeps that replay in its
// timeline, as abandoned, before the discard: its handler may have had effects, and a
// discarded letter is never taken again to record it later.
func TestDiscardAfterExpiredReplayLeaseRecordsTheReplay(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		e := newDLEnv(t, b, durable.Config{ReplayLease: 2 * time.Minute})
		id := e.capture(t, "sync", 1)[0]
		leaseToADeadProcess(t, e, id)
		e.clock.Advance(2 * time.Minute)
		if res, err := e.q.Discard(ctx, id, "ops", "stale"); res != durable.Discarded || err != nil {
			t.Fatalf("discard after the lease ran out: %v, %v", res, err)
		}
		d, tl := e.letter(t, id)
		if d.Status != record.DeadLetterDiscarded || len(tl) != 2 ||
			tl[0].Kind != record.TimelineReplay || tl[0].Outcome != "abandoned" || tl[0].Actor != "alice" ||
			tl[1].Kind != record.TimelineDiscard || tl[1].Actor != "ops" {
			t.Fatalf("letter %+v, timeline %q", d, timeline(tl))
		}
	})
}

// OnDead fires once per dead item, with its last error, whichever way it died; a panicking
// OnDead is logged and changes nothing.
func TestOnDeadOncePerDeadItem(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		e := newDLEnv(t, b, durable.Config{Policy: fastPolicy})
		e.handle(func(_ context.Context, w *Work) error {
			switch w.N {
			case 1:
				return fmt.Errorf("permanent %d", w.N)
			case 2:
				return retryableErr{fmt.Sprintf("transient, attempt %d", e.runs.Load())}
			}
			return nil
		})
		permanent := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 1}))
		exhausted := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 2}))
		must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 3}))
		undecodable, _, err := e.store.Enqueue(ctx, istore.NewItem{Name: "test.work", Payload: []byte("{bad"), NextAt: e.clock.Now(), Now: e.clock.Now()})
		if err != nil {
			t.Fatal(err)
		}
		for range fastPolicy.MaxAttempts {
			durabletest.Work(ctx, t, e.q, e.m)
			e.clock.Advance(time.Hour)
		}
		got := e.onDead()
		if len(got) != 3 {
			t.Fatalf("OnDead calls %+v", got)
		}
		byItem := map[record.ItemID]record.DeadLetter{}
		for _, d := range got {
			if _, dup := byItem[d.ItemID]; dup {
				t.Fatalf("OnDead twice for item %d", d.ItemID)
			}
			byItem[d.ItemID] = d
			if it := item(t, e.q, d.ItemID); it.LastError != d.Error || it.State != record.StateDead {
				t.Fatalf("letter %+v, item %+v", d, it)
			}
		}
		if byItem[permanent.ID].Error != "permanent 1" || !strings.HasPrefix(byItem[exhausted.ID].Error, "transient") ||
			!strings.Contains(byItem[record.ItemID(undecodable)].Error, "does not decode") {
			t.Fatalf("letters %+v", byItem)
		}
		if _, tl := e.letter(t, byItem[exhausted.ID].ID); len(tl) != fastPolicy.MaxAttempts {
			t.Fatalf("timeline %q", timeline(tl))
		}
		if st := stats(t, e.q); st.DeadLetters[record.DeadLetterFailed] != 3 || st.Counts[record.StateDead] != 3 {
			t.Fatalf("stats %+v", st)
		}

		// Through a running scheduler, with an OnDead that panics: the observer after it is
		// still called.
		logs := &logRecorder{}
		var calls, after atomic.Int64
		e2 := newDLEnv(t, b, durable.Config{Logger: logs.logger(), OnDead: []func(context.Context, record.DeadLetter){func(context.Context, record.DeadLetter) {
			calls.Add(1)
			panic("boom")
		}, func(context.Context, record.DeadLetter) { after.Add(1) }}})
		e2.handle(func(context.Context, *Work) error { return errPermanent })
		id := must[durable.Enqueued](t)(e2.q.Enqueue(ctx, &Work{N: 9})).ID
		start(t, e2.q, e2.m)
		waitState(t, e2.q, id, record.StateDead)
		eventually(t, 10*time.Second, "OnDead", func() bool { return logs.has("durable: OnDead panicked") })
		if calls.Load() != 1 || after.Load() != 1 || !logs.has("durable: dead letter") {
			t.Fatalf("OnDead calls %d, of the observer after the panicking one %d", calls.Load(), after.Load())
		}
	})
}

// Stats.DeadLetters counts letters by status, so an alert on failed letters clears.
func TestStatsDeadLetters(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		e := newDLEnv(t, b, durable.Config{})
		want := func(failed, replayed, discarded int) {
			t.Helper()
			st := stats(t, e.q)
			w := map[record.DeadLetterStatus]int{record.DeadLetterFailed: failed, record.DeadLetterReplayed: replayed, record.DeadLetterDiscarded: discarded}
			if fmt.Sprint(st.DeadLetters) != fmt.Sprint(w) {
				t.Fatalf("stats %v, want %v", st.DeadLetters, w)
			}
		}
		want(0, 0, 0)
		ids := e.capture(t, "s", 3)
		want(3, 0, 0)
		must[durable.Resolution](t)(e.q.Replay(ctx, e.m, ids[0], "ops"))
		want(2, 1, 0)
		must[durable.Resolution](t)(e.q.Discard(ctx, ids[1], "ops", "dup"))
		want(1, 1, 1)
		must[durable.Resolution](t)(e.q.Replay(ctx, e.m, ids[2], "ops"))
		want(0, 2, 1)
	})
}
