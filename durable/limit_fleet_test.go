package durable_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// The limit child (mode "limit"): a scheduler whose Work items call the parent's endpoint
// (childURLEnv) with their item id, N and instance, and succeed when it answers 200.

// limitChildWorkers is the workers of a limit child.
const limitChildWorkers = 6

// limitedN is the first Work.N of the items of the unlimited key in the limit tests.
const limitedN = 1000

func runLimitChild() int {
	ctx := context.Background()
	q, err := durable.Open(ctx, targetDriver(os.Getenv(childBackendEnv), os.Getenv(childTargetEnv)), durable.Config{Policy: fastPolicy})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer q.Close()
	durable.Register[*Work](q, "test.work")
	url := os.Getenv(childURLEnv)
	var started *os.File // where each handler notes that it started, before its call
	if path := os.Getenv(childStartedEnv); path != "" {
		if started, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		}
		defer started.Close()
	}
	client := &http.Client{Timeout: 10 * time.Second}
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, w *Work) (mediator.Void, error) {
		d, _ := durable.FromContext(ctx, w)
		if started != nil {
			// One write(2) per line: the kernel has it once it returns, SIGKILL or not.
			_, _ = fmt.Fprintf(started, "%d@%s\n", d.ItemID, d.Instance)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s?id=%d&n=%d&inst=%s", url, d.ItemID, w.N, d.Instance), nil)
		if err != nil {
			return mediator.Void{}, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return mediator.Void{}, err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return mediator.Void{}, fmt.Errorf("endpoint: %s", resp.Status)
		}
		return mediator.Void{}, nil
	})
	if err := m.Build(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	lease, _ := time.ParseDuration(os.Getenv(childLeaseEnv))
	return serveChild(q, m, durable.SchedulerConfig{Workers: limitChildWorkers, BatchSize: 10, PollInterval: 5 * time.Millisecond, Lease: lease})
}

// childStartedEnv names the file where a limit child's handlers note that they started.
const childStartedEnv = "SWITCHBOARD_TEST_CHILD_STARTED"

// inflightEndpoint is the dependency of the limit tests: it counts the calls of the limited
// key in flight (and their most at once), the calls per item, and the limited calls in flight
// per instance. Each call takes callTime.
type inflightEndpoint struct {
	mu        sync.Mutex
	inflight  int // calls of the limited key now
	most      int // the most at once
	mostSince int // the most at once since resetMost
	// gather is the limit: until mostSince has reached it, a limited call waits (up to
	// gatherWait) for that many to be in flight, so that a loaded machine whose children
	// claim slowly still shows whether the limit lets that many through at once.
	gather     int
	gathered   chan struct{}         // closed once mostSince reaches gather
	other      int                   // calls of the unlimited key now
	otherMost  int                   // their most at once
	calls      map[record.ItemID]int // calls per item
	byInstance map[string]int        // limited calls now, per instance
	reached    map[string]bool       // "id@instance": the item's call from that instance reached the endpoint
	// startedFile holds a line "id@instance" for each handler that started (see runLimitChild).
	startedFile string
	total       int
}

const callTime = 20 * time.Millisecond

// gatherWait bounds how long a limited call waits for the limit's number in flight: a limit
// that lets fewer through is still seen, a few seconds late.
const gatherWait = 3 * time.Second

// resetMost starts counting the most calls at once (and gathering them) again.
func (e *inflightEndpoint) resetMost() {
	e.mostSince, e.gathered = 0, make(chan struct{})
}

func (e *inflightEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.URL.Query().Get("id"), 10, 64)
	n, _ := strconv.Atoi(r.URL.Query().Get("n"))
	inst := r.URL.Query().Get("inst")
	limited := n < limitedN
	e.mu.Lock()
	e.calls[record.ItemID(id)]++
	e.reached[fmt.Sprintf("%d@%s", id, inst)] = true
	e.total++
	if limited {
		e.inflight++
		e.byInstance[inst]++
		e.most, e.mostSince = max(e.most, e.inflight), max(e.mostSince, e.inflight)
	} else {
		e.other++
		e.otherMost = max(e.otherMost, e.other)
	}
	gathered, gathering := e.gathered, limited && e.mostSince < e.gather
	if limited && !gathering && e.mostSince >= e.gather {
		select {
		case <-e.gathered:
		default:
			close(e.gathered)
		}
	}
	e.mu.Unlock()
	if gathering {
		select {
		case <-gathered:
		case <-time.After(gatherWait):
		}
	}
	time.Sleep(callTime) // the dependency's latency: what the limit keeps few calls in
	e.mu.Lock()
	if limited {
		e.inflight--
		e.byInstance[inst]--
	} else {
		e.other--
	}
	e.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (e *inflightEndpoint) read(f func(e *inflightEndpoint)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f(e)
}

// fleetLimitRun starts three limit children on b's database, with lease, against a limit of 4
// on key "api": limited items of the key and 60 of another. kill, when set, is called with the
// children and the endpoint while they run.
func fleetLimitRun(t *testing.T, b backend, lease time.Duration, limited int, kill func(children []*child, instances []string, e *inflightEndpoint)) (*durable.Queue, *inflightEndpoint, []record.ItemID) {
	t.Helper()
	ctx := context.Background()
	op := b.queue(t, durable.Config{Policy: fastPolicy})
	const limit = 4
	l := must[record.ConcurrencyLimit](t)(op.SetConcurrencyLimit(ctx, "api", limit, "ops", durable.LimitReason("fleet test")))
	if l.Key != "api" || l.Max != limit || l.Actor != "ops" {
		t.Fatalf("limit: %+v", l)
	}
	e := &inflightEndpoint{calls: map[record.ItemID]int{}, byInstance: map[string]int{}, reached: map[string]bool{},
		startedFile: filepath.Join(t.TempDir(), "started"), gather: limit, gathered: make(chan struct{})}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	var ids []record.ItemID
	for i := range limited {
		ids = append(ids, must[durable.Enqueued](t)(op.Enqueue(ctx, &Work{N: i}, durable.WithBreakerKey("api"))).ID)
	}
	for i := range 60 {
		ids = append(ids, must[durable.Enqueued](t)(op.Enqueue(ctx, &Work{N: limitedN + i}, durable.WithBreakerKey("other"))).ID)
	}
	var (
		children  []*child
		instances []string
	)
	for range 3 {
		c := startChild(t, b, "limit", childLeaseEnv+"="+lease.String(), childURLEnv+"="+srv.URL, childStartedEnv+"="+e.startedFile)
		instances = append(instances, c.line(t, "READY")[1])
		children = append(children, c)
	}
	if kill != nil {
		kill(children, instances, e)
	}
	eventually(t, 90*time.Second, "every item to succeed", func() bool {
		n, err := op.Stats(ctx)
		return err == nil && n.Counts[record.StateSucceeded] == int64(len(ids))
	})
	for _, c := range children {
		if c.cmd.ProcessState == nil {
			c.stop(t)
		}
	}
	e.read(func(e *inflightEndpoint) {
		t.Logf("limited calls at most %d at once; the other key's at most %d; %d calls", e.most, e.otherMost, e.total)
		if e.most > limit {
			t.Errorf("the endpoint saw %d calls of the limited key at once, more than the limit of %d", e.most, limit)
		}
		if e.most < limit {
			t.Errorf("the endpoint saw at most %d calls of the limited key at once: the limit of %d was never reached", e.most, limit)
		}
	})
	ls := must[[]record.ConcurrencyLimit](t)(op.ConcurrencyLimits(ctx))
	if len(ls) != 1 || ls[0].InUse != 0 {
		t.Errorf("limits after the run: %+v; want the one, with no slot held", ls)
	}
	return op, e, ids
}

// Three processes share a limit of 4 on a key: the endpoint never sees more than 4 of its
// calls at once and sees 4; every item succeeds with exactly one call and one attempt (the
// items the limit held back were charged none), none is lost or stuck.
func TestFleetConcurrencyLimitHoldsAcrossThreeProcesses(t *testing.T) {
	eachPostgres(t, func(t *testing.T, b backend) {
		op, e, ids := fleetLimitRun(t, b, 30*time.Second, 120, nil)
		e.read(func(e *inflightEndpoint) {
			for _, id := range ids {
				if e.calls[id] != 1 {
					t.Errorf("item %d called the endpoint %d times, want once", id, e.calls[id])
				}
			}
		})
		for _, id := range ids {
			it := item(t, op, id)
			if it.State != record.StateSucceeded || outcomes(attempts(t, op, id)) != "1:succeeded" {
				t.Errorf("item %d: %s, attempts %s; want succeeded at its first attempt", id, it.State, outcomes(attempts(t, op, id)))
			}
		}
	})
}

// One of the three processes is killed while it holds slots of the limited key: its slots come
// back when its leases run out and are swept (the others reach the limit again: enough items
// are left for that, 400 at 4 at a time taking 2 s, the lease), and nothing is lost; an item is
// run twice only where the store recorded the lost lease, and no item is charged an abandoned
// attempt it never ran (an item the limit held back is not charged, even by a crash).
func TestFleetConcurrencyLimitSlotsComeBackAfterSIGKILL(t *testing.T) {
	b := pgBackend(t)
	var killedAt time.Time
	op, e, ids := fleetLimitRun(t, b, 2*time.Second, 400, func(children []*child, instances []string, e *inflightEndpoint) {
		victim := ""
		eventually(t, 30*time.Second, "a process to hold slots", func() bool {
			ok := false
			e.read(func(e *inflightEndpoint) {
				for inst, n := range e.byInstance {
					if n > 0 && e.total > 20 {
						victim, ok = inst, true
					}
				}
			})
			return ok
		})
		for i, c := range children {
			if instances[i] == victim {
				c.kill(t)
				killedAt = time.Now()
			}
		}
		if killedAt.IsZero() {
			t.Fatalf("no child is instance %q", victim)
		}
		e.read(func(e *inflightEndpoint) { e.resetMost() })
	})
	startedLines := must[[]byte](t)(os.ReadFile(e.startedFile))
	started := map[string]bool{}
	for _, l := range strings.Split(string(startedLines), "\n") {
		started[l] = true
	}
	e.read(func(e *inflightEndpoint) {
		charged, neverRan := 0, 0
		for _, id := range ids {
			for _, a := range attempts(t, op, id) {
				if a.Outcome != record.OutcomeAbandoned {
					continue
				}
				charged++
				if at := fmt.Sprintf("%d@%s", id, a.Instance); !started[at] {
					neverRan++
					t.Logf("item %d was charged abandoned attempt %d (%q) on %s, whose handler never started (its call reached the endpoint: %v)", id, a.Number, a.Error, a.Instance, e.reached[at])
				}
			}
		}
		t.Logf("%d abandoned attempts charged, %d of them to items that never ran", charged, neverRan)
		// The items the limit held back are parked by the statement that found no slot, so a
		// crash charges none of them (TestAcquireHoldsBackInOneTransaction checks that
		// statement). What remains is the round trip between a claim and each claimed item's
		// look at the slots: the kill, timed at a call's start, may find the items of the
		// process's last claim there, at most one per worker it had free. Seen: one or two.
		if neverRan > limitChildWorkers {
			t.Errorf("%d items were charged an abandoned attempt whose handler never started; want at most the %d a claim can hold between itself and its look at the slots", neverRan, limitChildWorkers)
		}
		if e.mostSince != 4 {
			t.Errorf("after the kill the endpoint saw at most %d limited calls at once, want the limit (4): the killed process's slots did not come back", e.mostSince)
		}
		for _, id := range ids {
			abandoned := 0
			for _, a := range attempts(t, op, id) {
				if a.Outcome == record.OutcomeAbandoned {
					abandoned++
				}
			}
			if e.calls[id] < 1 || e.calls[id] > 1+abandoned {
				t.Errorf("item %d called the endpoint %d times with %d abandoned attempts", id, e.calls[id], abandoned)
			}
		}
	})
	for _, id := range ids {
		if it := item(t, op, id); it.State != record.StateSucceeded {
			t.Errorf("item %d: %s", id, it.State)
		}
	}
	t.Logf("all done %v after the kill", time.Since(killedAt))
}
