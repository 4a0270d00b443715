package hedge_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/budget"
	"github.com/switchboard-go/switchboard/behaviors/hedge"
	"github.com/switchboard-go/switchboard/mediator"
)

// step is what one attempt of a scripted handler does: take so long, then fail with err (or
// succeed), unless its context ends first.
type step struct {
	took time.Duration
	err  error
}

// scripted answers the n-th attempt (counted across calls) with steps[n]; past the end it
// answers at once. It records which attempts saw their context cancelled.
type scripted struct {
	steps     []step
	n         atomic.Int32
	mu        sync.Mutex
	cancelled []int
}

func (s *scripted) Handle(ctx context.Context, q *Call) (*Reply, error) {
	i := int(s.n.Add(1)) - 1
	st := step{}
	if i < len(s.steps) {
		st = s.steps[i]
	}
	if st.took > 0 {
		t := time.NewTimer(st.took)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			s.mu.Lock()
			s.cancelled = append(s.cancelled, i)
			s.mu.Unlock()
			return nil, ctx.Err()
		}
	}
	if st.err != nil {
		return nil, st.err
	}
	return &Reply{Text: fmt.Sprint("attempt ", i)}, nil
}

// notes records the notices of OnHedge.
type notes struct {
	mu  sync.Mutex
	got []string
}

func (n *notes) on(_ context.Context, x hedge.Notice) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, fmt.Sprintf("%s %d", x.Phase, x.Attempt))
}

func (n *notes) String() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.got, ", ")
}

func hedged(t *testing.T, s *scripted, cfg hedge.Config) (*mediator.Mediator, *hedge.Behavior, *notes) {
	t.Helper()
	n := &notes{}
	cfg.OnHedge = append(cfg.OnHedge, n.on)
	h := hedge.New(cfg)
	return build(t, s.Handle, h), h, n
}

// A slow primary is hedged after the fixed delay, the hedge wins, and the primary is
// cancelled before the call returns.
func TestHedgeWinsAfterTheDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{steps: []step{{took: time.Second}, {took: 5 * time.Millisecond}}}
		m, h, n := hedged(t, s, hedge.Config{Delay: 10 * time.Millisecond})
		start := time.Now()
		r, err := mediator.Send(context.Background(), m, &Call{})
		if err != nil || r.Text != "attempt 1" {
			t.Fatalf("%v %v", r, err)
		}
		if took := time.Since(start); took != 15*time.Millisecond {
			t.Errorf("took %s, want the delay and the hedge's 5ms", took)
		}
		if fmt.Sprint(s.cancelled) != "[0]" || n.String() != "sent 1, won 1, cancelled 0" {
			t.Errorf("cancelled %v, notices %q", s.cancelled, n)
		}
		if snap := h.Snapshot(); len(snap) != 1 || snap[0].Calls != 1 || snap[0].Sent != 1 || snap[0].Won != 1 ||
			snap[0].Key != "*testkit.Call" || snap[0].Delay != 10*time.Millisecond {
			t.Errorf("snapshot %+v", snap)
		}
	})
}

// A call that ends before the delay sends nothing, and no hedge goes out later.
func TestFastCallSendsNoHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{steps: []step{{took: 9 * time.Millisecond}}}
		m, h, n := hedged(t, s, hedge.Config{Delay: 10 * time.Millisecond})
		if _, err := mediator.Send(context.Background(), m, &Call{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // fake time: a timer left running would fire now
		synctest.Wait()
		if s.n.Load() != 1 || n.String() != "" || h.Snapshot()[0].Sent != 0 {
			t.Fatalf("%d attempts, notices %q", s.n.Load(), n)
		}
	})
}

// The primary may still win after a hedge went out; the hedge is then cancelled.
func TestPrimaryWinsAfterTheHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{steps: []step{{took: 15 * time.Millisecond}, {took: time.Second}}}
		m, h, n := hedged(t, s, hedge.Config{Delay: 10 * time.Millisecond})
		start := time.Now()
		r, err := mediator.Send(context.Background(), m, &Call{})
		if err != nil || r.Text != "attempt 0" || time.Since(start) != 15*time.Millisecond {
			t.Fatalf("%v %v after %s", r, err, time.Since(start))
		}
		if fmt.Sprint(s.cancelled) != "[1]" || n.String() != "sent 1, won 0, cancelled 1" || h.Snapshot()[0].Won != 0 {
			t.Errorf("cancelled %v, notices %q, %+v", s.cancelled, n, h.Snapshot())
		}
	})
}

// A failure while another attempt runs does not end the call; when all fail, the primary's
// error is returned, after the last one failed.
func TestFailureWaitsForTheOthers(t *testing.T) {
	errPrimary, errHedge := errors.New("primary"), errors.New("hedge")
	t.Run("other succeeds", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := &scripted{steps: []step{{took: 15 * time.Millisecond, err: errPrimary}, {took: 20 * time.Millisecond}}}
			m, _, _ := hedged(t, s, hedge.Config{Delay: 10 * time.Millisecond})
			start := time.Now()
			r, err := mediator.Send(context.Background(), m, &Call{})
			if err != nil || r.Text != "attempt 1" || time.Since(start) != 30*time.Millisecond {
				t.Fatalf("%v %v after %s", r, err, time.Since(start))
			}
		})
	})
	t.Run("all fail", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := &scripted{steps: []step{{took: 15 * time.Millisecond, err: errPrimary}, {took: 20 * time.Millisecond, err: errHedge}}}
			m, _, n := hedged(t, s, hedge.Config{Delay: 10 * time.Millisecond})
			start := time.Now()
			_, err := mediator.Send(context.Background(), m, &Call{})
			if err != errPrimary || time.Since(start) != 30*time.Millisecond || n.String() != "sent 1" {
				t.Fatalf("%v after %s, notices %q", err, time.Since(start), n)
			}
		})
	})
	t.Run("primary fails first, before the delay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := &scripted{steps: []step{{took: 5 * time.Millisecond, err: errPrimary}}}
			m, _, _ := hedged(t, s, hedge.Config{Delay: 10 * time.Millisecond})
			if _, err := mediator.Send(context.Background(), m, &Call{}); err != errPrimary {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
			synctest.Wait()
			if s.n.Load() != 1 {
				t.Fatalf("%d attempts: a failed call must not be hedged afterwards (retry's business)", s.n.Load())
			}
		})
	})
}

// MaxHedges sends up to that many hedges, one delay apart.
func TestMaxHedges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{steps: []step{{took: time.Second}, {took: time.Second}, {took: time.Second}, {took: 5 * time.Millisecond}}}
		m, h, n := hedged(t, s, hedge.Config{Delay: 10 * time.Millisecond, MaxHedges: 3})
		start := time.Now()
		r, err := mediator.Send(context.Background(), m, &Call{})
		if err != nil || r.Text != "attempt 3" || time.Since(start) != 35*time.Millisecond {
			t.Fatalf("%v %v after %s", r, err, time.Since(start))
		}
		if n.String() != "sent 1, sent 2, sent 3, won 3, cancelled 0, cancelled 1, cancelled 2" || h.Snapshot()[0].Sent != 3 {
			t.Errorf("notices %q", n)
		}
	})
}

// A hedge the budget refuses is not sent, nor any after it; the call waits for the attempts
// running.
func TestBudgetRefusalStopsHedges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// One call allows one retry: a ratio of 1 and no floor.
		b := budget.New(budget.Config{Ratio: 1, Floor: budget.NoFloor})
		var refusal error
		s := &scripted{steps: []step{{took: 100 * time.Millisecond}, {took: 80 * time.Millisecond}, {took: time.Millisecond}}}
		m, h, n := hedged(t, s, hedge.Config{Delay: 10 * time.Millisecond, MaxHedges: 3, Budget: b,
			OnHedge: []func(context.Context, hedge.Notice){func(_ context.Context, x hedge.Notice) {
				if x.Phase == hedge.Refused {
					refusal = x.Err
				}
			}}})
		start := time.Now()
		r, err := mediator.Send(context.Background(), m, &Call{})
		if err != nil || r.Text != "attempt 1" || time.Since(start) != 90*time.Millisecond {
			t.Fatalf("%v %v after %s", r, err, time.Since(start))
		}
		if s.n.Load() != 2 || n.String() != "sent 1, refused 2, won 1, cancelled 0" || !errors.Is(refusal, budget.ErrSpent) {
			t.Errorf("%d attempts, notices %q, refusal %v", s.n.Load(), n, refusal)
		}
		if u := b.Snapshot(); len(u) != 1 || u[0].Calls != 1 || u[0].Retries != 1 || u[0].Refused != 1 {
			t.Errorf("budget %+v: one call, one hedge allowed, one refused", u)
		}
		if snap := h.Snapshot()[0]; snap.Refused != 1 || snap.Sent != 1 {
			t.Errorf("%+v", snap)
		}
	})
}

// The durable scheduler's dispatch is one attempt: no hedge, no budget call.
func TestSingleAttemptStepsAside(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := budget.New(budget.Config{})
		s := &scripted{steps: []step{{took: time.Second}}}
		m, h, n := hedged(t, s, hedge.Config{Delay: 10 * time.Millisecond, Budget: b})
		q := &Call{}
		ctx := mediator.WithMarks(context.Background(), q, mediator.SingleAttempt)
		if _, err := mediator.Send(ctx, m, q); err != nil {
			t.Fatal(err)
		}
		if s.n.Load() != 1 || n.String() != "" || len(b.Snapshot()) != 0 || len(h.Snapshot()) != 1 || h.Snapshot()[0].Calls != 0 {
			t.Fatalf("%d attempts, notices %q, budget %+v, %+v", s.n.Load(), n, b.Snapshot(), h.Snapshot())
		}
	})
}

// The caller's cancellation ends the call with the context's error; no hedge is sent after
// it, and the budget is not asked.
func TestCallerCancellation(t *testing.T) {
	t.Run("before the delay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := budget.New(budget.Config{})
			s := &scripted{steps: []step{{took: time.Second}}}
			m, _, n := hedged(t, s, hedge.Config{Delay: 10 * time.Millisecond, Budget: b})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
			defer cancel()
			_, err := mediator.Send(ctx, m, &Call{})
			time.Sleep(time.Second)
			synctest.Wait()
			if u := b.Snapshot(); !errors.Is(err, context.DeadlineExceeded) || s.n.Load() != 1 || len(u) != 1 || u[0].Retries != 0 || n.String() != "" {
				t.Fatalf("%v, %d attempts, budget %+v, notices %q", err, s.n.Load(), u, n)
			}
		})
	})
	t.Run("after a hedge", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := &scripted{steps: []step{{took: time.Second}, {took: time.Second}}}
			m, _, n := hedged(t, s, hedge.Config{Delay: 10 * time.Millisecond, MaxHedges: 2})
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(15*time.Millisecond, cancel)
			start := time.Now()
			_, err := mediator.Send(ctx, m, &Call{})
			took := time.Since(start)
			time.Sleep(time.Second)
			synctest.Wait()
			if err != context.Canceled || took != 15*time.Millisecond || s.n.Load() != 2 || len(s.cancelled) != 2 ||
				n.String() != "sent 1" {
				t.Fatalf("%v after %s, %d attempts, cancelled %v, notices %q", err, took, s.n.Load(), s.cancelled, n)
			}
		})
	})
}

// With Percentile, the delay is the fallback until MinSamples, then follows the latency of
// the key's recent successful calls, within one bucket (25 %) above.
func TestPercentileDelayAdapts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var latency atomic.Int64
		handler := func(ctx context.Context, q *Call) (*Reply, error) {
			tm := time.NewTimer(time.Duration(latency.Load()))
			defer tm.Stop()
			select {
			case <-tm.C:
				return &Reply{}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		h := hedge.New(hedge.Config{Delay: 50 * time.Millisecond, Percentile: 90, MinSamples: 20, Key: endpointKey})
		m := build(t, handler, h)
		send := func(n int) {
			for range n {
				if _, err := mediator.Send(context.Background(), m, &Call{Endpoint: "a"}); err != nil {
					t.Fatal(err)
				}
			}
		}
		delay := func() time.Duration { return h.Snapshot()[0].Delay }
		latency.Store(int64(2 * time.Millisecond))
		send(10)
		if d := delay(); d != 50*time.Millisecond {
			t.Fatalf("delay %s before MinSamples, want the fallback", d)
		}
		send(100)
		if d := delay(); d < 2*time.Millisecond || d > 2500*time.Microsecond {
			t.Fatalf("delay %s, want p90 of 2ms", d)
		}
		latency.Store(int64(8 * time.Millisecond))
		send(3000)
		if d := delay(); d < 8*time.Millisecond || d > 10*time.Millisecond {
			t.Fatalf("delay %s, want p90 of the recent 8ms", d)
		}
		sent := h.Snapshot()[0].Sent // while the sketch learnt the new latency
		send(200)
		if snap := h.Snapshot()[0]; sent > 100 || snap.Sent != sent || snap.Samples < 500 || snap.Samples > 1100 {
			t.Fatalf("%+v (%d sent while adapting): calls no slower than the percentile are not hedged; the sketch holds about 1,000 samples", snap, sent)
		}
	})
}

// The keys beyond MaxKeys share OverflowKey.
func TestMaxKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{}
		h := hedge.New(hedge.Config{Delay: time.Second, Key: endpointKey, MaxKeys: 2})
		m := build(t, s.Handle, h)
		for _, e := range []string{"a", "b", "c", "d", "a"} {
			if _, err := mediator.Send(context.Background(), m, &Call{Endpoint: e}); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		for _, k := range h.Snapshot() {
			got = append(got, fmt.Sprintf("%s:%d", k.Key, k.Calls))
		}
		if fmt.Sprint(got) != "[_overflow:2 a:2 b:1]" {
			t.Fatal(got)
		}
	})
}

func TestValidate(t *testing.T) {
	err := hedge.Config{Percentile: 100, MinSamples: -1, MaxHedges: -1, MaxKeys: -1}.Validate()
	for _, field := range []string{"Delay", "Percentile", "MinSamples", "MaxHedges", "MaxKeys"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%v does not name %s", err, field)
		}
	}
	if err := (hedge.Config{Delay: time.Millisecond, MinSamples: 10}).Validate(); err == nil || !strings.Contains(err.Error(), "Percentile") {
		t.Errorf("MinSamples without Percentile: %v", err)
	}
	if err := (hedge.Config{Delay: time.Millisecond, MaxHedges: 17}).Validate(); err == nil || !strings.Contains(err.Error(), "MaxHedges") {
		t.Errorf("MaxHedges 17: %v", err)
	}
	if err := (hedge.Config{Delay: time.Millisecond, Percentile: 99, MaxHedges: 16}).Validate(); err != nil {
		t.Error(err)
	}
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, (&scripted{}).Handle)
	m.Use(hedge.New(hedge.Config{}))
	if err := m.Build(); err == nil || !strings.Contains(err.Error(), "Delay") {
		t.Errorf("Build: %v", err)
	}
}

// A panic inside a hedge, on the timer's goroutine, does not take the process down: it
// becomes a *mediator.PanicError, returned when no attempt succeeded.
func TestHedgePanicBecomesItsError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		boom := mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
			if n.Add(1) == 2 {
				panic("inner behavior bug")
			}
			return next(ctx, req)
		})
		s := &scripted{steps: []step{{took: 30 * time.Millisecond, err: errors.New("primary")}}}
		m := mediator.New(nil, mediator.Config{})
		mediator.HandleFunc(m, s.Handle)
		m.Use(hedge.New(hedge.Config{Delay: 10 * time.Millisecond}))
		m.Use(boom, mediator.WithOrder(behaviors.HedgeOrder+1))
		if err := m.Build(); err != nil {
			t.Fatal(err)
		}
		_, err := mediator.Send(context.Background(), m, &Call{})
		var pe *mediator.PanicError
		if !errors.As(err, &pe) || pe.Value != "inner behavior bug" || len(pe.Stack) == 0 {
			t.Fatalf("%v", err)
		}
	})
}

// timeClock is a behaviors.Clock of its own over the time package (the bubble's fake time).
type timeClock struct{}

func (timeClock) Now() time.Time { return time.Now() }
func (timeClock) After(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// With a Clock of the user's, the delays run on its timers: fast calls leave no goroutine,
// and a slow one is hedged after the delay.
func TestClockTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{steps: []step{{took: time.Millisecond}, {took: time.Millisecond}, {took: time.Second}, {took: 5 * time.Millisecond}}}
		m, _, n := hedged(t, s, hedge.Config{Delay: 10 * time.Millisecond, Clock: timeClock{}, MaxHedges: 2})
		for range 2 {
			if _, err := mediator.Send(context.Background(), m, &Call{}); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		r, err := mediator.Send(context.Background(), m, &Call{})
		if err != nil || r.Text != "attempt 3" || time.Since(start) != 15*time.Millisecond || n.String() != "sent 1, won 1, cancelled 0" {
			t.Fatalf("%v %v after %s, notices %q", r, err, time.Since(start), n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if s.n.Load() != 4 {
			t.Fatalf("%d attempts: a stopped clock timer sent a hedge", s.n.Load())
		}
	})
}

// A panic of the primary attempt (of a behavior inside; a handler's panic is an error) goes on
// up the caller's goroutine, and no hedge is sent after it.
func TestPrimaryPanicSendsNoHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		boom := mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
			n.Add(1)
			panic("inner behavior bug")
		})
		m := mediator.New(nil, mediator.Config{})
		mediator.HandleFunc(m, (&scripted{}).Handle)
		m.Use(hedge.New(hedge.Config{Delay: 10 * time.Millisecond}))
		m.Use(boom, mediator.WithOrder(behaviors.HedgeOrder+1))
		if err := m.Build(); err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() {
				if v := recover(); v != "inner behavior bug" {
					t.Errorf("recovered %v", v)
				}
			}()
			_, _ = mediator.Send(context.Background(), m, &Call{})
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		if n.Load() != 1 {
			t.Fatalf("%d attempts after the primary panicked", n.Load())
		}
	})
}

// refusal is a refusal of req, as an open breaker or a rate limiter inside returns at once.
type refusal struct{ req any }

func (r *refusal) Error() string { return "refused" }
func (r *refusal) Refusal() behaviors.RefusalInfo {
	return behaviors.RefusalInfo{By: "breaker", Request: r.req}
}

// A hedge the pipeline inside refuses at once (an open breaker, a rate limit) reached no
// dependency: it is counted refused, not sent, its budget charge is given back, and no more
// hedges follow (regression: it was counted sent and kept its charge).
func TestPipelineRefusalRefundsHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := budget.New(budget.Config{Ratio: 1, Floor: budget.NoFloor})
		q := &Call{}
		s := &scripted{steps: []step{{took: 100 * time.Millisecond}, {err: &refusal{req: q}}}}
		m, h, n := hedged(t, s, hedge.Config{Delay: 10 * time.Millisecond, MaxHedges: 3, Budget: b})
		r, err := mediator.Send(context.Background(), m, q)
		if err != nil || r.Text != "attempt 0" || s.n.Load() != 2 {
			t.Fatalf("%v %v after %d attempts", r, err, s.n.Load())
		}
		if n.String() != "sent 1, refused 1, won 0" {
			t.Errorf("notices %q", n)
		}
		if snap := h.Snapshot()[0]; snap.Sent != 0 || snap.Refused != 1 || snap.Won != 0 {
			t.Errorf("%+v, want the hedge counted refused, not sent", snap)
		}
		if u := b.Snapshot(); len(u) != 1 || u[0].Calls != 1 || u[0].Retries != 0 {
			t.Errorf("budget %+v, want the call counted and the refused hedge refunded", u)
		}
	})
}

// A call whose primary is refused at once is no call of the budget: it grows no allowance.
func TestRefusedCallNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := budget.New(budget.Config{})
		q := &Call{}
		s := &scripted{steps: []step{{err: &refusal{req: q}}}}
		m, _, _ := hedged(t, s, hedge.Config{Delay: 10 * time.Millisecond, Budget: b})
		if _, err := mediator.Send(context.Background(), m, q); !behaviors.Refused(err, q) {
			t.Fatalf("err %v", err)
		}
		if _, err := mediator.Send(context.Background(), m, &Call{}); err != nil {
			t.Fatal(err)
		}
		if u := b.Snapshot(); len(u) != 1 || u[0].Calls != 1 {
			t.Errorf("budget %+v, want the refused call not counted", u)
		}
	})
}

// The budget's observers run without the call's lock: an observer that blocks holds up the
// hedge only, not the caller, whose call may end meanwhile; the hedge the call no longer
// wants is then not sent and its charge is given back (regression: fire asked the budget
// under the lock, and the caller's call could not end while an observer ran).
func TestBudgetObserverOutsideLock(t *testing.T) {
	entered, release, refunded := make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	b := budget.New(budget.Config{Ratio: 1, Floor: budget.NoFloor,
		OnSpend: []func(context.Context, budget.Spend){func(_ context.Context, s budget.Spend) {
			if s.Refund {
				close(refunded)
				return
			}
			entered <- struct{}{}
			<-release
		}}})
	h := hedge.New(hedge.Config{Delay: time.Millisecond, Budget: b})
	var n atomic.Int32
	m := build(t, func(context.Context, *Call) (*Reply, error) {
		if n.Add(1) == 1 {
			<-entered // the hedge is asking the budget: end the primary now
		}
		return &Reply{Text: "ok"}, nil
	}, h)
	done := make(chan error, 1)
	go func() {
		_, err := mediator.Send(context.Background(), m, &Call{})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second):
		close(release)
		<-done
		t.Fatal("the call could not end while the budget's observer ran: the lock was held")
	}
	close(release)
	select {
	case <-refunded:
	case <-time.After(10 * time.Second):
		t.Fatal("the hedge the call no longer wanted kept its charge")
	}
	if u := b.Snapshot(); len(u) != 1 || u[0].Retries != 0 || n.Load() != 1 {
		t.Errorf("budget %+v after %d attempts, want the unsent hedge refunded", u, n.Load())
	}
	if snap := h.Snapshot()[0]; snap.Sent != 0 {
		t.Errorf("%+v", snap)
	}
}
