package durable_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/httpcall"
	"github.com/switchboard-go/switchboard/mediator"
)

// Deliver posts a webhook to URL: its handler sends it through httpcall, whose per-host
// breaker guards it.
type Deliver struct {
	mediator.Command
	URL string `json:"url"`
	N   int    `json:"n"`
}

// receiver is a loopback webhook receiver that counts the requests reaching it.
type receiver struct {
	*httptest.Server
	hits atomic.Int64
}

func newReceiver(t *testing.T, answer func(w http.ResponseWriter, hit int64)) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { answer(w, r.hits.Add(1)) }))
	t.Cleanup(r.Close)
	return r
}

// dispatcher is a webhook dispatcher as a user writes it: a typed *Deliver whose handler posts
// through an http.Client on httpcall, a breaker per host on the *httpcall.Call pipeline, and
// the queue's registration of *Deliver guarded by that host's breaker.
type dispatcher struct {
	q     *durable.Queue
	m     *mediator.Mediator
	hosts *breaker.Registry
	clock *fakeClock
}

func newDispatcher(t *testing.T, b backend, open time.Duration) *dispatcher {
	clock := newFakeClock()
	q := b.queue(t, durable.Config{Clock: clock, Rand: rand.Float64,
		Policy: retry.Policy{MaxAttempts: 50, Strategy: retry.Exponential, BaseDelay: time.Second, Multiplier: 2, MaxDelay: 10 * time.Second, Jitter: behaviors.Off}})
	hosts := breaker.NewRegistry(breaker.Config{Key: httpcall.Authority, FailureThreshold: 5, OpenDuration: open, ProbeTimeout: time.Hour, Clock: clock})
	m := mediator.New(nil, mediator.Config{})
	httpcall.Register(m, nil)
	m.Use(breaker.New(hosts), mediator.ForRequest[*httpcall.Call]())
	client := &http.Client{Transport: httpcall.NewTransport(m, httpcall.Config{})}
	t.Cleanup(client.CloseIdleConnections)
	mediator.HandleFunc(m, func(ctx context.Context, d *Deliver) (mediator.Void, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, strings.NewReader(fmt.Sprintf(`{"n":%d}`, d.N)))
		if err != nil {
			return void, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return void, err
		}
		return void, resp.Body.Close()
	})
	durable.Register[*Deliver](q, "webhook.deliver", durable.WithBreaker(hosts, func(d *Deliver) string { return httpcall.AuthorityOf(d.URL) }))
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	return &dispatcher{q: q, m: m, hosts: hosts, clock: clock}
}

// items returns every item of the queue.
func (d *dispatcher) items(t *testing.T) []record.Item {
	t.Helper()
	var out []record.Item
	for after := record.ItemID(0); ; {
		page := must[[]record.Item](t)(d.q.List(context.Background(), durable.Filter{AfterID: after, Limit: 500}))
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = page[len(page)-1].ID
	}
}

// The webhook dispatcher with a host that is down: the items for it are held back by that
// host's breaker, which the registration names. While it is open no item reaches the host and
// none is charged an attempt; each open period the host gets one probe (the breaker's probe
// count), whatever the number of items; the parked items are due within a tenth of the open
// duration after the breaker may probe; a deadline ends the items it bounds at that moment,
// parked or not; once the host is back every item is delivered within that open period. The
// healthy host's items are not held back, and a host answering 503 with Retry-After is tried
// again no sooner than it asked.
func TestDispatcherHoldsItemsForADownHost(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const (
			open     = 30 * time.Second
			forDown  = 100
			forOK    = 20
			forBurst = 5
			expiring = 3
		)
		d := newDispatcher(t, b, open)
		var down atomic.Bool
		down.Store(true)
		downHost := newReceiver(t, func(w http.ResponseWriter, _ int64) {
			if down.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		})
		okHost := newReceiver(t, func(w http.ResponseWriter, _ int64) { w.WriteHeader(http.StatusNoContent) })
		burstHost := newReceiver(t, func(w http.ResponseWriter, hit int64) {
			if hit <= 3 {
				w.Header().Set("Retry-After", "2")
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		})
		ctx := context.Background()
		t0 := d.clock.Now()
		deadline := t0.Add(open + open/2) // after the first probe, before the second
		kind := map[record.ItemID]string{}
		enqueue := func(n int, url, what string, opts ...durable.EnqueueOption) {
			for i := range n {
				kind[must[durable.Enqueued](t)(d.q.Enqueue(ctx, &Deliver{URL: url, N: i}, opts...)).ID] = what
			}
		}
		enqueue(forDown, downHost.URL, "down")
		enqueue(forOK, okHost.URL, "ok")
		enqueue(forBurst, burstHost.URL, "burst")
		enqueue(expiring, downHost.URL, "expiring", durable.WithDeadline(deadline))
		downKey := httpcall.AuthorityOf(downHost.URL)
		start(t, d.q, d.m, durable.SchedulerConfig{Workers: 8, PollInterval: 10 * time.Millisecond})

		// rows counts the attempt rows of the items of what.
		rows := func(what string) int {
			n := 0
			for id, k := range kind {
				if k == what {
					n += len(attempts(t, d.q, id))
				}
			}
			return n
		}
		// Every attempt of a down-host item reached the host: a refusal is never an attempt.
		charged := func(when string) {
			t.Helper()
			if got, hits := rows("down")+rows("expiring"), downHost.hits.Load(); int64(got) != hits {
				t.Fatalf("%s: %d attempt rows for the down host's items, %d requests reached it", when, got, hits)
			}
		}
		// parked waits until every pending item for the down host is parked on its key and due
		// within a tenth of the open duration after the breaker may probe (an expiring one by
		// its deadline, if that is sooner), and returns that probe time.
		parked := func(when string) time.Time {
			t.Helper()
			var probeAt time.Time
			var why string
			defer func() {
				if t.Failed() {
					t.Logf("%s: last seen: %s", when, why)
				}
			}()
			eventually(t, 20*time.Second, when+": the down host's items parked for its next probe", func() bool {
				a := d.hosts.Admission(downKey)
				if n := stats(t, d.q).Counts[record.StateRunning]; a.State != breaker.StateOpen || n != 0 {
					why = fmt.Sprintf("breaker %+v, %d running", a, n)
					return false
				}
				probeAt = d.clock.Now().Add(a.Remaining)
				for _, it := range d.items(t) {
					k := kind[it.ID]
					if it.State != record.StatePending || k != "down" && k != "expiring" {
						continue
					}
					due := probeAt
					if k == "expiring" && deadline.Before(due) {
						due = deadline
					}
					if k == "expiring" && due.Equal(deadline) {
						if !it.NextAt.Equal(deadline) {
							why = fmt.Sprintf("expiring item %+v not due at its deadline %v", it, deadline)
							return false
						}
						continue
					}
					if it.NextAt.Before(due) || it.NextAt.After(due.Add(open/10)) {
						why = fmt.Sprintf("item %+v due outside [%v, +%v]", it, due, open/10)
						return false
					}
				}
				return true
			})
			return probeAt
		}

		// The first failures open the host's breaker; everything else for it is parked. The
		// items that failed before it opened come back after their backoff and are parked too.
		eventually(t, 20*time.Second, "the down host's breaker to open", func() bool {
			st := stats(t, d.q)
			return d.hosts.Admission(downKey).State == breaker.StateOpen && st.Counts[record.StateRunning] == 0 && st.OldestDue == 0
		})
		for range 10 {
			d.clock.Advance(time.Second)
			eventually(t, 20*time.Second, "the burst host's retries", func() bool { return stats(t, d.q).OldestDue == 0 })
		}
		probeAt := parked("after the backoffs")
		charged("while open")
		opened := downHost.hits.Load()
		if opened < 5 || opened > 5+8 {
			t.Fatalf("%d requests reached the down host before its breaker opened, want its threshold (5) plus at most the other workers' (7)", opened)
		}
		for id, k := range kind {
			if k == "ok" || k == "burst" {
				waitState(t, d.q, id, record.StateSucceeded)
			}
		}
		if okHost.hits.Load() != forOK {
			t.Fatalf("the healthy host got %d requests for %d items", okHost.hits.Load(), forOK)
		}
		for id, what := range kind {
			if what != "burst" {
				continue
			}
			as := attempts(t, d.q, id)
			for i := 1; i < len(as); i++ {
				if gap := as[i].StartedAt.Sub(as[i-1].EndedAt); gap < 2*time.Second {
					t.Fatalf("item %d: attempt %d started %s after the 503 that asked for 2s", id, i+1, gap)
				}
			}
		}

		// Three open periods with the host still down: one probe each.
		periods := 0
		for range 3 {
			d.clock.Set(probeAt.Add(open / 10)) // every parked item is due
			periods++
			probeAt = parked(fmt.Sprintf("after probe %d", periods))
			if hits := downHost.hits.Load() - opened; hits != int64(periods) {
				t.Fatalf("after %d open periods the down host got %d requests, want one probe per period", periods, hits)
			}
			charged(fmt.Sprintf("after probe %d", periods))
			if periods == 1 {
				// The deadline falls before the next probe: the expiring items die at it.
				d.clock.Set(deadline)
				for id, k := range kind {
					if k != "expiring" {
						continue
					}
					it := waitState(t, d.q, id, record.StateDead)
					if !it.UpdatedAt.Equal(deadline) || !strings.Contains(it.LastError, "deadline passed") {
						t.Fatalf("expired item: %+v", it)
					}
				}
			}
		}

		// The host is back: the next probe closes the breaker, and every parked item goes.
		down.Store(false)
		back := probeAt
		d.clock.Set(probeAt.Add(open / 10))
		for id, k := range kind {
			if k == "down" {
				waitState(t, d.q, id, record.StateSucceeded)
			}
		}
		if now := d.clock.Now(); now.Sub(back) > 2*open {
			t.Fatalf("delivered %s after the host came back, want within two open periods", now.Sub(back))
		}
		charged("at the end")

		// Counted: nothing lost, nothing run twice, nothing stuck, nothing wrongly recorded.
		var lost, twice, stuck int
		for _, it := range d.items(t) {
			ok := 0
			for _, a := range attempts(t, d.q, it.ID) {
				if a.Outcome == record.OutcomeSucceeded {
					ok++
				}
			}
			switch {
			case kind[it.ID] == "expiring":
				if it.State != record.StateDead || ok != 0 {
					lost++
				}
			case it.State != record.StateSucceeded:
				stuck++
			case ok != 1:
				twice++
			}
		}
		if len(kind) != forDown+forOK+forBurst+expiring || lost+twice+stuck != 0 {
			t.Fatalf("%d items: %d lost, %d run twice, %d stuck", len(kind), lost, twice, stuck)
		}
		t.Logf("down host: %d requests before its breaker opened, %d probes in %d open periods, %d deliveries; %d attempt rows for its items",
			opened, periods, periods, forDown, rows("down")+rows("expiring"))
		if got := downHost.hits.Load(); got != opened+int64(periods)+forDown {
			t.Fatalf("the down host got %d requests: %d before its breaker opened, %d probes, %d deliveries expected", got, opened, periods, forDown)
		}
	})
}

// One queue, two registries: SchedulerConfig.Breakers keyed by request type guards *Work, a
// registry keyed by host guards *Deliver through its registration; an enqueue may name the key
// itself. Each breaker holds back its own items and no others, and each one's reset frees
// them.
func TestTwoRegistriesGuardTheirOwnItems(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		types := breaker.NewRegistry(breaker.Config{Clock: e.clock})
		hosts := breaker.NewRegistry(breaker.Config{Key: httpcall.Authority, Clock: e.clock})
		durable.Register[*Deliver](e.q, "webhook.deliver", durable.WithBreaker(hosts, func(d *Deliver) string { return httpcall.AuthorityOf(d.URL) }))
		var ran sync.Map // item → handler calls
		count := func(ctx context.Context, req any) {
			if d, ok := durable.FromContext(ctx, req); ok {
				n, _ := ran.LoadOrStore(d.ItemID, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
			}
		}
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error { count(ctx, w); return nil }}, func(m *mediator.Mediator) {
			mediator.HandleFunc(m, func(ctx context.Context, d *Deliver) (mediator.Void, error) { count(ctx, d); return void, nil })
		})
		workKey, hostA := behaviors.TypeKey(reflect.TypeFor[*Work]()), httpcall.AuthorityOf("https://a.example/hook")
		types.Declare(workKey, "special")
		hosts.Declare(hostA)
		for _, trip := range []func() error{func() error { return types.Trip(workKey) }, func() error { return hosts.Trip(hostA) }} {
			if err := trip(); err != nil {
				t.Fatal(err)
			}
		}
		ctx := context.Background()
		enqueue := func(req any, opts ...durable.EnqueueOption) record.ItemID {
			return must[durable.Enqueued](t)(e.q.Enqueue(ctx, req, opts...)).ID
		}
		work := enqueue(&Work{N: 1})                                       // its type's breaker is open
		special := enqueue(&Work{N: 2}, durable.WithBreakerKey("special")) // guarded by "special", closed
		toA := enqueue(&Deliver{URL: "https://a.example/hook"})            // host a's breaker is open
		toB := enqueue(&Deliver{URL: "https://b.example/hook"})            // host b's is closed
		namedB := enqueue(&Deliver{URL: "https://a.example/x"}, durable.WithBreakerKey(httpcall.AuthorityOf("https://b.example/")))
		start(t, e.q, m, durable.SchedulerConfig{Breakers: types})
		for _, id := range []record.ItemID{special, toB, namedB} {
			waitState(t, e.q, id, record.StateSucceeded)
		}
		held := func(id record.ItemID, key string) {
			t.Helper()
			eventually(t, 20*time.Second, "the item to be parked on "+key, func() bool { return item(t, e.q, id).ParkedKey == key })
			if it, as := item(t, e.q, id), attempts(t, e.q, id); it.State != record.StatePending || it.Attempts != 0 || len(as) != 0 {
				t.Fatalf("held item %+v, %d rows", it, len(as))
			}
			if _, ok := ran.Load(id); ok {
				t.Fatalf("item %d held by %s ran", id, key)
			}
		}
		held(work, workKey)
		held(toA, hostA)
		if err := types.Reset(workKey); err != nil {
			t.Fatal(err)
		}
		waitState(t, e.q, work, record.StateSucceeded)
		held(toA, hostA) // another registry's reset frees nothing of host a's
		if err := hosts.Reset(hostA); err != nil {
			t.Fatal(err)
		}
		waitState(t, e.q, toA, record.StateSucceeded)
		for _, id := range []record.ItemID{work, special, toA, toB, namedB} {
			if n, _ := ran.Load(id); n == nil || n.(*atomic.Int64).Load() != 1 {
				t.Fatalf("item %d ran %v times", id, n)
			}
		}
	})
}

// A registration's WithBreaker names a registry and a key function over the registered type:
// anything else is a registration mistake, refused with the reason.
func TestWithBreakerRefusesMistakes(t *testing.T) {
	e := newEnv(t, sqliteBackend(t))
	hosts := breaker.NewRegistry(breaker.Config{})
	for _, c := range []struct {
		opt  durable.RegisterOption
		want string
	}{
		{durable.WithBreaker[*Deliver](nil, nil), "WithBreaker: nil registry"},
		{durable.WithBreaker(hosts, func(w *Work) string { return "" }), "WithBreaker: the key function takes *durable_test.Work, not the registered type"},
	} {
		opt, want := c.opt, c.want
		if err := registerErr(t, func() error { return durable.Register[*Deliver](e.q, "webhook.deliver", opt) }); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Register: %v, want %q", err, want)
		}
	}
}

// A deadline bounds an item's life: WithDeadline's, or the policy's MaxAge from the enqueue,
// the earlier of the two. A retry that would come after it is due at it instead, and the item
// dies then, without an attempt, with an error and a timeline entry saying so, and an
// "expired" outcome for the observers. An attempt that fails past it ends the item too.
func TestDeadlineEndsTheItem(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnvWith(t, b, func(q *durable.Queue) {
			durable.Register[*Deliver](q, "webhook.deliver", durable.WithPolicy(retry.Policy{MaxAge: 90 * time.Second}))
		})
		ctx := context.Background()
		t0 := e.clock.Now()
		var slow atomic.Bool
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error { return retryableErr{"busy"} }}, func(m *mediator.Mediator) {
			mediator.HandleFunc(m, func(ctx context.Context, d *Deliver) (mediator.Void, error) {
				if slow.Load() {
					e.clock.Advance(time.Minute) // the attempt runs past the deadline
				}
				return void, retryableErr{"busy"}
			})
		})
		if _, err := e.q.Enqueue(ctx, &Work{N: 1}, durable.WithDeadline(t0)); err == nil || !strings.Contains(err.Error(), "is not after now") {
			t.Fatalf("a deadline already past: %v", err)
		}
		if _, err := e.q.Enqueue(ctx, &Work{N: 1}, durable.WithDeadline(t0.Add(time.Second)), durable.WithDelay(time.Minute)); err == nil ||
			!strings.Contains(err.Error(), "after its deadline") {
			t.Fatalf("due after its deadline: %v", err)
		}
		work := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 1}, durable.WithDeadline(t0.Add(2500*time.Millisecond)))).ID
		aged := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Deliver{URL: "https://a.example/"}, durable.WithDeadline(t0.Add(time.Hour)), durable.WithDelay(70*time.Second))).ID
		if it := item(t, e.q, aged); !it.Deadline.Equal(t0.Add(90 * time.Second)) {
			t.Fatalf("deadline %v, want MaxAge (90s) after the enqueue, before WithDeadline's hour", it.Deadline)
		}
		var (
			mu      sync.Mutex
			settled = map[string][]string{} // request name → outcomes heard
		)
		start(t, e.q, m, durable.SchedulerConfig{OnSettled: []func(string, record.Settled){func(name string, outcome record.Settled) {
			mu.Lock()
			settled[name] = append(settled[name], string(outcome))
			mu.Unlock()
		}}})
		// fastPolicy: attempts at 0s, 1s; the third would be at 3s, after the deadline.
		eventually(t, 20*time.Second, "the first attempt", func() bool { return len(attempts(t, e.q, work)) == 1 })
		e.clock.Advance(time.Second)
		eventually(t, 20*time.Second, "the second attempt", func() bool { return len(attempts(t, e.q, work)) == 2 })
		if it := item(t, e.q, work); !it.NextAt.Equal(t0.Add(2500 * time.Millisecond)) {
			t.Fatalf("the retry after the deadline is due %v, want at the deadline", it.NextAt)
		}
		e.clock.Set(t0.Add(2500 * time.Millisecond))
		it := waitState(t, e.q, work, record.StateDead)
		if !strings.HasPrefix(it.LastError, "deadline passed (") || !strings.HasSuffix(it.LastError, "last error: busy") || len(attempts(t, e.q, work)) != 2 {
			t.Fatalf("expired item %+v, rows %s", it, outcomes(attempts(t, e.q, work)))
		}
		letters := must[[]record.DeadLetter](t)(func() ([]record.DeadLetter, error) {
			lp, err := e.q.DeadLetters(ctx, durable.DeadLetterFilter{})
			ls := lp.Letters
			return ls, err
		}())
		if len(letters) != 1 || letters[0].ItemID != work {
			t.Fatalf("letters %+v", letters)
		}
		// The expired entry is added once the dead item's letter is written: wait for it.
		var (
			tl  []record.TimelineEntry
			err error
		)
		eventually(t, 20*time.Second, "the expired timeline entry", func() bool {
			_, tl, err = e.q.DeadLetter(ctx, letters[0].ID)
			return err != nil || len(tl) == 3
		})
		if err != nil || len(tl) != 3 || tl[2].Kind != record.TimelineExpired || tl[2].Outcome != record.OutcomeExpired ||
			!tl[2].EndedAt.Equal(t0.Add(2500*time.Millisecond)) || !strings.HasPrefix(tl[2].Error, "deadline passed") {
			t.Fatalf("timeline %+v, %v", tl, err)
		}
		eventually(t, 20*time.Second, "the observers", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return fmt.Sprint(settled["test.work"]) == "[retried retried expired]"
		})

		// An attempt that fails past the deadline ends the item with its error.
		slow.Store(true)
		e.clock.Set(t0.Add(80 * time.Second))
		it = waitState(t, e.q, aged, record.StateDead)
		if as := attempts(t, e.q, aged); !strings.HasPrefix(it.LastError, "deadline passed") || !strings.HasSuffix(it.LastError, "busy") ||
			outcomes(as) != "1:failed" {
			t.Fatalf("item failing past its deadline %+v, rows %s", it, outcomes(as))
		}
		// Both letters say the deadline ended their items: at the claim, and after the attempt.
		lp, err := e.q.DeadLetters(ctx, durable.DeadLetterFilter{})
		all := lp.Letters
		if err != nil || len(all) != 2 || all[0].Cause != record.DeadDeadline || all[1].Cause != record.DeadDeadline {
			t.Fatalf("the expired items' letters %+v, %v: want both with cause %q", all, err, record.DeadDeadline)
		}
		eventually(t, 20*time.Second, "the observers", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return fmt.Sprint(settled["webhook.deliver"]) == "[expired]"
		})
	})
}

// Expiring is a request that carries its own deadline.
type Expiring struct {
	mediator.Command
	Until time.Time `json:"until"`
}

func (e *Expiring) Deadline() time.Time { return e.Until }

// A request's own Deadline method gives its item's deadline, so a request the deferral stores
// keeps it; WithDeadline on an enqueue wins over it.
func TestRequestCarriesItsDeadline(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnvWith(t, b, func(q *durable.Queue) { durable.Register[*Expiring](q, "test.expiring") })
		ctx := context.Background()
		until := e.clock.Now().Add(time.Hour)
		m := mediatorFor(t, handlers{}, func(m *mediator.Mediator) {
			mediator.HandleFunc(m, func(context.Context, *Expiring) (mediator.Void, error) { return void, retryableErr{"busy"} })
			m.Use(durable.NewDeferral(e.q, durable.DeferralConfig{}))
		})
		_, err := mediator.Send(ctx, m, &Expiring{Until: until})
		d, ok := errors.AsType[*durable.DeferredError](err)
		if !ok {
			t.Fatalf("send: %v", err)
		}
		if it := item(t, e.q, d.ItemID); !it.Deadline.Equal(until) {
			t.Fatalf("deferred item's deadline %v, want the request's %v", it.Deadline, until)
		}
		earlier := until.Add(-time.Minute)
		res := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Expiring{Until: until}, durable.WithDeadline(earlier)))
		if it := item(t, e.q, res.ID); !it.Deadline.Equal(earlier) {
			t.Fatalf("deadline %v, want WithDeadline's %v", it.Deadline, earlier)
		}
		if _, err := e.q.Enqueue(ctx, &Expiring{Until: e.clock.Now()}); err == nil || !strings.Contains(err.Error(), "the deadline") {
			t.Fatalf("a request whose deadline has passed: %v", err)
		}
	})
}

// The item whose own failure opened its breaker waits on that breaker as the items it then
// refuses do: the breaker's reset frees it with them. It used to wait out the whole open time,
// though the reset had freed the others at once.
func TestTrippingItemIsFreedWithTheOthers(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		reg := breaker.NewRegistry(breaker.Config{Key: func(any) string { return "k" }, FailureThreshold: 1, OpenDuration: time.Hour, Clock: e.clock})
		var up atomic.Bool
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			if !up.Load() {
				return retryableErr{"down"}
			}
			return nil
		}}, func(m *mediator.Mediator) { m.Use(breaker.New(reg)) })
		ctx := context.Background()
		tripping := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 1})).ID
		start(t, e.q, m, durable.SchedulerConfig{Breakers: reg})
		eventually(t, 20*time.Second, "the tripping attempt", func() bool { return len(attempts(t, e.q, tripping)) == 1 })
		if it := item(t, e.q, tripping); it.State != record.StatePending || it.ParkedKey != "k" {
			t.Fatalf("the item whose failure opened the breaker: %+v", it)
		}
		up.Store(true)
		if err := reg.Reset("k"); err != nil {
			t.Fatal(err)
		}
		waitState(t, e.q, tripping, record.StateSucceeded) // the clock does not move
	})
}

// Items parked to wait for a probe's verdict that never comes (the instance whose probe it was
// died, and a fresh one's breaker never opened) are freed as soon as an item parked on the same
// key gets through, not a Recheck later.
func TestParkedItemsFreedWhenOneGetsThrough(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		var failWith atomic.Pointer[error]
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			if p := failWith.Load(); p != nil {
				return *p
			}
			return nil
		}}, func(m *mediator.Mediator) { m.Use(durable.NewDeferral(e.q, durable.DeferralConfig{})) })
		ctx := context.Background()
		defer1 := func(remaining time.Duration) record.ItemID {
			failWith.Store(ptr(error(&breaker.OpenError{Key: "k", Remaining: remaining})))
			_, err := mediator.Send(ctx, m, &Work{N: int(remaining)})
			d, ok := errors.AsType[*durable.DeferredError](err)
			if !ok {
				t.Fatalf("send: %v", err)
			}
			return d.ItemID
		}
		waiting := defer1(time.Hour) // parked far ahead, as for a verdict
		due := defer1(0)             // parked on the same key, due now
		failWith.Store(nil)
		fresh := breaker.NewRegistry(breaker.Config{Clock: e.clock}) // this instance's breaker of k never opened
		start(t, e.q, m, durable.SchedulerConfig{Breakers: fresh})
		waitState(t, e.q, due, record.StateSucceeded)
		waitState(t, e.q, waiting, record.StateSucceeded) // the clock does not move
	})
}

// A replay that a breaker turns away did not run: the letter stays failed, no replay is counted
// and the timeline records none. It used to be a failed replay, counted.
func TestReplayRefusedByABreakerIsNotAReplay(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		reg := breaker.NewRegistry(breaker.Config{Key: func(any) string { return "k" }, Clock: e.clock})
		m := mediatorFor(t, handlers{work: func(context.Context, *Work) error { return errors.New("not retried") }},
			func(m *mediator.Mediator) { m.Use(breaker.New(reg)) })
		ctx := context.Background()
		id := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 1})).ID
		start(t, e.q, m)
		waitState(t, e.q, id, record.StateDead)
		lp, err := e.q.DeadLetters(ctx, durable.DeadLetterFilter{})
		letters := lp.Letters
		if err != nil || len(letters) != 1 {
			t.Fatalf("letters %v, %v", letters, err)
		}
		reg.Declare("k")
		if err := reg.Trip("k"); err != nil {
			t.Fatal(err)
		}
		res, err := e.q.Replay(ctx, m, letters[0].ID, "ops")
		if res != durable.Refused || !errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("replay against the open breaker: %q, %v", res, err)
		}
		d, tl, err := e.q.DeadLetter(ctx, letters[0].ID)
		if err != nil || d.Status != record.DeadLetterFailed || d.RetryCount != 0 || len(tl) != 1 {
			t.Fatalf("after the refused replay: %+v, timeline %+v, %v", d, tl, err)
		}
	})
}

// An item enqueued due now is claimed by the running scheduler of its instance at once, not at
// its next poll.
func TestEnqueueWakesTheScheduler(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		m := mediatorFor(t, handlers{})
		claimed := make(chan struct{}, 100)
		start(t, e.q, m, durable.SchedulerConfig{PollInterval: time.Hour, OnClaim: []func(time.Duration, int, error){
			func(time.Duration, int, error) { claimed <- struct{}{} }}})
		<-claimed // its first look found nothing: the next poll is an hour away
		id := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
		waitState(t, e.q, id, record.StateSucceeded) // within waitState's bound, an hour before the poll
	})
}
