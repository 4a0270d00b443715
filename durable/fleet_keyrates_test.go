package durable_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/mediator"
)

// The per-key rates child: a process whose one limiter has a rate per channel (keyRates), shared
// through the queue's database, sending on every channel as fast as the limits let it from
// "READY" on, until SIGTERM. It then prints every lease the store granted it and its calls:
//
//	LEASE <channel> <first permit, database clock, ns> <interval ns> <permits>
//	CALLS <channel> <calls> <permits leased> <fell back 0|1>
//	END
const keyRatesDefault = 100 // ratelimit.Config.Rate: the channels Limits does not list

// keyRates are the fleet's rates per channel: two of Limits, and one at Config.Rate.
var keyRates = map[string]float64{"sms": 50, "email": 100, "push": keyRatesDefault}

// ChannelSend is the per-key rates child's request: a message on a channel.
type ChannelSend struct {
	mediator.Returns[*HitReply]
	Channel string
}

// leaseRecorder is a ratelimit.PermitStore that keeps the leases the store granted.
type leaseRecorder struct {
	ratelimit.PermitStore
	mu     sync.Mutex
	leases []leaseRecord
}

type leaseRecord struct {
	key      string
	first    int64
	interval time.Duration
	permits  int
}

func (r *leaseRecorder) Lease(ctx context.Context, req ratelimit.LeaseRequest) (ratelimit.Lease, error) {
	l, err := r.PermitStore.Lease(ctx, req)
	if err == nil && l.Permits > 0 {
		r.mu.Lock()
		r.leases = append(r.leases, leaseRecord{req.Key, l.First.UnixNano(), req.Interval, l.Permits})
		r.mu.Unlock()
	}
	return l, err
}

func runKeyRatesChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	q, err := durable.Open(context.Background(), targetDriver(os.Getenv(childBackendEnv), os.Getenv(childTargetEnv)), durable.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer q.Close()
	// A Timeout longer than the default: on a loaded machine a slow lease is waited for
	// rather than falling back to the share, whose permits the store does not see.
	st, err := durable.NewRateLimitStore(q, durable.RateLimitStoreConfig{Name: "keyrates",
		Instance: os.Getenv(childInstanceEnv), Timeout: 5 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	rec := &leaseRecorder{PermitStore: st}
	var fellMu sync.Mutex
	fell := map[string]bool{}
	rl := ratelimit.New(ratelimit.Config{Rate: keyRatesDefault, MaxWait: time.Second, Store: rec,
		Limits: map[string]ratelimit.Limit{"sms": {Rate: keyRates["sms"]}, "email": {Rate: keyRates["email"]}},
		Key:    func(req any) string { return req.(*ChannelSend).Channel },
		OnFallback: []func(context.Context, ratelimit.FallbackEvent){func(_ context.Context, e ratelimit.FallbackEvent) {
			fellMu.Lock()
			fell[e.Key] = fell[e.Key] || e.Active
			fellMu.Unlock()
		}}})
	calls := map[string]*atomic.Int64{}
	for ch := range keyRates {
		calls[ch] = new(atomic.Int64)
	}
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(_ context.Context, s *ChannelSend) (*HitReply, error) {
		calls[s.Channel].Add(1)
		return &HitReply{}, nil
	})
	m.Use(rl)
	if err := m.Build(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	// One call a channel before the run, so that the run measures the limits, not the start of
	// a process (opening the queue, the first leases).
	for ch := range keyRates {
		if _, err := mediator.Send(context.Background(), m, &ChannelSend{Channel: ch}); err != nil {
			fmt.Fprintln(os.Stderr, "child: the first call:", err)
			return 2
		}
	}
	fmt.Println("READY")
	var wg sync.WaitGroup
	for ch := range keyRates {
		for range 8 {
			wg.Go(func() {
				for ctx.Err() == nil {
					_, err := mediator.Send(ctx, m, &ChannelSend{Channel: ch})
					if wait := retryAfterOf(err); wait > 0 {
						select { // a refused caller comes back when told to
						case <-time.After(wait):
						case <-ctx.Done():
						}
					}
				}
			})
		}
	}
	<-ctx.Done()
	wg.Wait()
	_ = rl.Close() // no lease under way: every lease granted is recorded
	rec.mu.Lock()
	defer rec.mu.Unlock()
	leased := map[string]int{}
	for _, l := range rec.leases {
		fmt.Printf("LEASE %s %d %d %d\n", l.key, l.first, l.interval.Nanoseconds(), l.permits)
		leased[l.key] += l.permits
	}
	fellMu.Lock()
	defer fellMu.Unlock()
	for ch, n := range calls {
		f := 0
		if fell[ch] {
			f = 1
		}
		fmt.Printf("CALLS %s %d %d %d\n", ch, n.Load(), leased[ch], f)
	}
	fmt.Println("END")
	return 0
}

// retryAfterOf is the wait a refusal tells, or 0.
func retryAfterOf(err error) time.Duration {
	if le, ok := errors.AsType[*ratelimit.LimitedError](err); ok {
		return le.Wait
	}
	return 0
}

// Three processes, one limiter configuration: sms at 50 a second and email at 100 (Limits),
// push at the default Rate of 100, shared through one PostgreSQL database. Over 5 s of the
// database's clock, from a second after every process sends, the permits the store granted for
// each channel are within 15 % of its own rate; no permit of a channel's timeline is granted
// twice; every lease carried its channel's own interval; and no process made more calls of a
// channel than it was granted permits.
//
// The window is counted from the leases' permit times, by the database's clock, not from wall
// sleeps or the calls' arrival: a process or the test itself held up by a loaded machine moves
// no permit in or out of it. It fails on a channel leased at another rate (the default's for
// sms: 100 a second, twice its own), on permits granted twice or beyond the rate, and on leases
// that fall behind the fleet's demand by more than 15 % over the window (a database or
// processes stalled for more than about 0.75 s in it).
func TestFleetPerKeyRatesAcrossThreeProcesses(t *testing.T) {
	t.Parallel()
	b := pgBackend(t)
	q := b.bare(t, durable.Config{}) // migrated before the children start
	db := durable.StoreOf(q).DB()
	ctx := context.Background()
	dbNow := func() time.Time {
		var now time.Time
		if err := db.QueryRowContext(ctx, "SELECT clock_timestamp()").Scan(&now); err != nil {
			t.Fatal(err)
		}
		return now
	}
	var children []*child
	for _, name := range []string{"k1", "k2", "k3"} {
		children = append(children, startChild(t, b, "keyrates", childInstanceEnv+"="+name))
	}
	for _, c := range children {
		c.line(t, "READY")
	}
	const window = 5 * time.Second
	from := dbNow().Add(time.Second)
	to := from.Add(window)
	// Every permit before to is leased once the database's clock has passed it (a lease's
	// first permit is never before its now, at a burst of 1).
	for deadline := time.Now().Add(time.Minute); ; {
		d := to.Add(100 * time.Millisecond).Sub(dbNow())
		if d <= 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the database's clock did not pass %v within a minute", to)
		}
		time.Sleep(min(d, 200*time.Millisecond)) // measuring: the window's length, by the database's clock
	}
	type keyStats struct {
		slots        map[int64]bool
		inWindow     int
		leases       int
		calls, fells int64
	}
	stats := map[string]*keyStats{}
	for ch := range keyRates {
		stats[ch] = &keyStats{slots: map[int64]bool{}}
	}
	for i, c := range children {
		if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		ended := false
		for l := range c.lines {
			f := strings.Fields(l)
			switch {
			case len(f) == 5 && f[0] == "LEASE":
				s, rate := stats[f[1]], keyRates[f[1]]
				first, interval, permits := atoi64(t, f[2]), atoi64(t, f[3]), atoi64(t, f[4])
				if want := int64(time.Second) / int64(rate); interval != want {
					t.Errorf("k%d leased %s at an interval of %v, want %v (%v a second)", i+1, f[1], time.Duration(interval), time.Duration(want), rate)
				}
				s.leases++
				for p := range permits {
					at := first + p*interval
					if s.slots[at] {
						t.Errorf("%s: the permit at %d leased twice", f[1], at)
					}
					s.slots[at] = true
					if at >= from.UnixNano() && at < to.UnixNano() {
						s.inWindow++
					}
				}
			case len(f) == 5 && f[0] == "CALLS":
				calls, leased, fell := atoi64(t, f[2]), atoi64(t, f[3]), atoi64(t, f[4])
				stats[f[1]].calls += calls
				stats[f[1]].fells += fell
				if fell == 0 && calls > leased {
					t.Errorf("k%d made %d calls of %s with %d permits leased", i+1, calls, f[1], leased)
				}
			case len(f) == 1 && f[0] == "END":
				ended = true
			}
		}
		if err := c.cmd.Wait(); err != nil || !ended {
			t.Fatalf("k%d did not end cleanly (%v, END printed: %v)", i+1, err, ended)
		}
	}
	keys := make([]string, 0, len(stats))
	for k := range stats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s, rate := stats[k], keyRates[k]
		want := rate * window.Seconds()
		t.Logf("%s: %d permits in %v of the database's clock (%.1f a second, its rate %v); over the run %d permits in %d leases, %d calls, %d processes fell back",
			k, s.inWindow, window, float64(s.inWindow)/window.Seconds(), rate, len(s.slots), s.leases, s.calls, s.fells)
		if lo, hi := want*0.85, want*1.15; float64(s.inWindow) < lo || float64(s.inWindow) > hi {
			t.Errorf("%s: %d permits in %v, want %.0f..%.0f (%v a second ±15 %%)", k, s.inWindow, window, lo, hi, rate)
		}
	}
}

func atoi64(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
