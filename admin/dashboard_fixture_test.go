package admin_test

// The data the browser tests run over, made through the real handler (admin.New) over a real
// breaker registry and a real durable queue (durabletest.NewQueue): dead letters are items
// that failed until dead (durabletest.Work) or failed items of a batch run (RunBatch), the
// breakers failed until open, a schedule ran through the scheduler.

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// sessionCookie is the name of the dashboard's session cookie.
const sessionCookie = "switchboard_admin"

// The request types of the dashboard's queue.
type (
	uiContact struct {
		mediator.Command
		Email string   `json:"email"`
		Name  string   `json:"name"`
		Tags  []string `json:"tags"`
	}
	uiCharge struct {
		mediator.Command
		Order       int `json:"order"`
		AmountCents int `json:"amount_cents"`
	}
	// uiReceipt is stored as its Raw bytes (rawCodec), which need not be JSON.
	uiReceipt struct {
		mediator.Command
		Raw string
	}
	uiCardCharge struct {
		mediator.Command
		Order int `json:"order"`
	}
	uiImport struct {
		mediator.Command
		Name string `json:"name"`
	}
	uiWebhook struct{ mediator.Command }
	uiFiller  struct{ mediator.Command }
	uiPull    struct{ mediator.Command }
	uiReport  struct{ mediator.Command }
)

type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return []byte(v.(*uiReceipt).Raw), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	v.(*uiReceipt).Raw = string(data)
	return nil
}

// uiErr is an error the scheduler retries.
type uiErr struct{ msg string }

func (e uiErr) Error() string   { return e.msg }
func (e uiErr) Retryable() bool { return true }

// dashboard is the admin handler the browser tests drive, served under /admin/ on loopback.
type dashboard struct {
	url   string
	reg   *breaker.Registry
	q     *durable.Queue
	m     *mediator.Mediator
	clock *durabletest.ManualClock // the queue's

	mu    sync.Mutex
	fail  map[string]string // request key → the error its handler fails with
	posts []string          // "METHOD path" of every state-changing request the handler accepted
}

// Breaker returns the registry's breaker key.
func (d *dashboard) Breaker(key string) breaker.Snapshot {
	s, _ := d.reg.Get(key)
	return s
}

// Letter returns the queue's dead letter id with its timeline.
func (d *dashboard) Letter(id int64) (record.DeadLetter, []record.TimelineEntry) {
	l, tl, _ := d.q.DeadLetter(context.Background(), record.DeadLetterID(id))
	return l, tl
}

// Posts returns the state-changing requests the handler accepted, one a line.
func (d *dashboard) Posts() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.posts, "\n")
}

func (d *dashboard) failing(key string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if msg, ok := d.fail[key]; ok {
		return uiErr{msg}
	}
	return nil
}

func (d *dashboard) setFail(key, msg string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if msg == "" {
		delete(d.fail, key)
		return
	}
	d.fail[key] = msg
}

// startDashboard serves the dashboard over four breakers (two open, one closed with a failure,
// one half-open), six failed dead letters (ids 1 to 6; 1 and 3 succeed when replayed, 4 fails
// again) and two schedules, one of which has run and failed.
func startDashboard(t *testing.T) *dashboard {
	return newDashboard(t, false)
}

// layoutDashboard is startDashboard with what the layout must cope with besides: two- and
// three-digit ids (10, 11, 123), dotted request names, URL keys, an error too long for its cell,
// a letter of a batch run (no item, no recorded attempt), a zero-length attempt, and no
// schedule.
func layoutDashboard(t *testing.T) *dashboard {
	return newDashboard(t, true)
}

func newDashboard(t *testing.T, layout bool) *dashboard { return newDashboardWith(t, layout, false) }

// newDashboardWith is newDashboard; with running, the queue's scheduler keeps running after
// the setup (until the test ends), so that it takes up bulk actions.
func newDashboardWith(t *testing.T, layout, running bool) *dashboard {
	t.Helper()
	ctx := context.Background()
	start := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	d := &dashboard{clock: durabletest.NewManualClock(start), fail: map[string]string{}}
	d.q = durabletest.NewQueue(t, durable.Config{Clock: d.clock, Logger: zap.NewNop(), InstanceID: "worker-1"})
	q := d.q
	pol := func(n int) durable.RegisterOption {
		return durable.WithPolicy(retry.Policy{MaxAttempts: n, BaseDelay: 30 * time.Second, MaxDelay: 30 * time.Second})
	}
	durable.Register[*uiContact](q, "ImportContact", pol(3))
	durable.Register[*uiCharge](q, "ChargeCard", pol(5))
	durable.Register[*uiReceipt](q, "SendReceipt", pol(4), durable.WithCodec(rawCodec{}))
	durable.Register[*uiCardCharge](q, "payments.charge-card", pol(2))
	durable.Register[*uiImport](q, "crm.import-contact")
	durable.Register[*uiWebhook](q, "notifications.deliver-webhook")
	durable.Register[*uiFiller](q, "filler")
	if !layout {
		durable.Schedule(q, "nightly-report", "0 7 * * *", func() *uiReport { return &uiReport{} }, durable.WithLocation(mustZone(t, "Europe/Amsterdam")))
		durable.Schedule(q, "crm-pull", "@every 15m", func() *uiPull { return &uiPull{} })
	}

	longErr := "POST https://api.payments.example/v1/charge?region=eu&attempt=3: 502 Bad Gateway: upstream connect error or disconnect/reset before headers. reset reason: connection termination; retried 5 times over 2m30s, the last after a 60s backoff; the processor's status page reports degraded authorisations in eu-west-1"
	pulled := make(chan struct{}, 1)
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, r *uiContact) (mediator.Void, error) {
		return mediator.Void{}, d.failing("contact/" + r.Email)
	})
	mediator.HandleFunc(m, func(ctx context.Context, r *uiCharge) (mediator.Void, error) {
		return mediator.Void{}, d.failing("order-" + strconv.Itoa(r.Order))
	})
	mediator.HandleFunc(m, func(ctx context.Context, r *uiReceipt) (mediator.Void, error) {
		return mediator.Void{}, d.failing(r.Raw)
	})
	attempt := 0
	mediator.HandleFunc(m, func(ctx context.Context, r *uiCardCharge) (mediator.Void, error) {
		// The first attempt fails at once, the second after 1.5 s (of the queue's clock).
		if attempt++; attempt == 1 {
			return mediator.Void{}, uiErr{"connection refused"}
		}
		d.clock.Advance(1500 * time.Millisecond)
		return mediator.Void{}, uiErr{longErr}
	})
	mediator.HandleFunc(m, func(ctx context.Context, r *uiImport) (mediator.Void, error) {
		return mediator.Void{}, errors.New(`mapping: field "email" is required`)
	})
	mediator.HandleFunc(m, func(ctx context.Context, r *uiWebhook) (mediator.Void, error) {
		return mediator.Void{}, errors.New("timeout after 10s")
	})
	mediator.HandleFunc(m, func(ctx context.Context, r *uiFiller) (mediator.Void, error) {
		return mediator.Void{}, errors.New("filler")
	})
	mediator.HandleFunc(m, func(ctx context.Context, r *uiPull) (mediator.Void, error) {
		d.clock.Advance(4 * time.Second) // the run takes 4 s
		pulled <- struct{}{}
		return mediator.Void{}, errors.New("crm: 502 Bad Gateway")
	})
	mediator.HandleFunc(m, func(ctx context.Context, r *uiReport) (mediator.Void, error) { return mediator.Void{}, nil })
	must(t, m.Build())
	d.m = m

	// Dead letters 1 to 6, in order, a minute or more apart.
	for _, l := range []struct {
		dedupe, failKey, err string
		req                  any
	}{
		{"contact/ann@example", "contact/ann@example", `mapping: field "email" is required`, &uiContact{Email: "ann@example", Name: "Ann", Tags: []string{"vip", "eu"}}},
		{"contact/empty", "contact/", "mapping: empty record", &uiContact{}},
		{"order-7781", "order-7781", "POST https://api.payments.example/v1/charge: 503 Service Unavailable", &uiCharge{Order: 7781, AmountCents: 1299}},
		{"order-7790", "order-7790", "card declined: <script>alert(1)</script>", &uiCharge{Order: 7790, AmountCents: 4500}},
		{"receipt-7790", "not json: <b>raw</b> bytes", "smtp: 421 try again later", &uiReceipt{Raw: "not json: <b>raw</b> bytes"}},
		{"receipt-7791", `{"to":"bob@example"}`, "smtp: 421 try again later", &uiReceipt{Raw: `{"to":"bob@example"}`}},
	} {
		d.setFail(l.failKey, l.err)
		d.dieAll(t, l.req, l.dedupe, "worker-1")
	}
	d.setFail("contact/ann@example", "") // 1 and 3 succeed when replayed; 4 fails again
	d.setFail("order-7781", "")

	if layout {
		d.discardedFillers(t, 3) // 7 to 9
		d.dieAll(t, &uiCardCharge{Order: 7781}, "https://api.payments.example/v1/charge?region=eu&customer=cus_7781", "worker-1", "worker-2")
		d.batch(t, "crm-sync", "contact/ann.lee@example.com", &uiImport{Name: "Ann Lee"})
		d.discardedFillers(t, 111) // 12 to 122
		id := d.batch(t, "notifications.webhooks", "https://hooks.partner.example/v2/events/order.created", &uiWebhook{})
		for range 12 {
			if res, err := q.Replay(ctx, m, id, "admin"); res != durable.StillFailed {
				t.Fatalf("Replay(%d) = %v, %v", id, res, err)
			}
		}
		if id != 123 {
			t.Fatalf("the last letter is %d; want 123", id)
		}
	} else {
		// crm-pull runs once, through the scheduler, and fails after 4 s.
		must(t, q.Start(m))
		d.clock.Advance(15 * time.Minute)
		select {
		case <-pulled:
		case <-time.After(30 * time.Second):
			t.Fatal("crm-pull did not run")
		}
		stop := func() {
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			must(t, q.Shutdown(sctx))
		}
		if running {
			t.Cleanup(stop)
		} else {
			stop()
		}
	}

	d.reg = breakers(t)
	h, err := admin.New(admin.Config{Breakers: d.reg, Queue: q, Sender: m, Token: testToken, RateLimits: uiRateLimits{}})
	must(t, err)
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", d.record(h)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	d.url = srv.URL + "/admin/"
	return d
}

// dieAll enqueues req with the dedupe key and works it, one attempt per instance named in
// turn (the last one repeated), until it is a dead letter.
func (d *dashboard) dieAll(t *testing.T, req any, dedupe string, instances ...string) {
	t.Helper()
	ctx := context.Background()
	_, err := d.q.Enqueue(ctx, req, durable.WithDedupeKey(dedupe))
	must(t, err)
	for i := 0; ; i++ {
		res := durabletest.Work(ctx, t, d.q, d.m, durabletest.AsInstance(instances[min(i, len(instances)-1)]))
		if res.Dead > 0 {
			break
		}
		if res.Retried != 1 || i > 10 {
			t.Fatalf("working %T: %v", req, res)
		}
		d.clock.Advance(time.Minute)
	}
	d.clock.Advance(time.Minute)
}

// batch runs req as the one item of a batch of source, which fails, and returns its letter.
func (d *dashboard) batch(t *testing.T, source, key string, req any) record.DeadLetterID {
	t.Helper()
	res, err := d.q.RunBatch(context.Background(), d.m, source, []durable.BatchItem{{Key: key, Request: req}})
	if err != nil || len(res.DeadLetters) != 1 {
		t.Fatalf("RunBatch(%s) = %+v, %v", source, res, err)
	}
	d.clock.Advance(time.Minute)
	return res.DeadLetters[0]
}

// discardedFillers makes n dead letters and discards them, to move the ids on.
func (d *dashboard) discardedFillers(t *testing.T, n int) {
	t.Helper()
	ctx := context.Background()
	items := make([]durable.BatchItem, n)
	for i := range items {
		items[i] = durable.BatchItem{Key: "filler-" + strconv.Itoa(i), Request: &uiFiller{}}
	}
	res, err := d.q.RunBatch(ctx, d.m, "fillers", items)
	if err != nil || len(res.DeadLetters) != n {
		t.Fatalf("RunBatch(fillers) = %d letters, %v", len(res.DeadLetters), err)
	}
	for ids := range slices.Chunk(res.DeadLetters, 100) {
		_, err := d.q.DiscardMany(ctx, ids, "admin", "filler")
		must(t, err)
	}
}

// breakers returns a registry with the dashboard's four breakers: "search-index" half-open,
// the payment endpoint open with 5 failures and 4:40 left, "crm sync 100%" open, "mailer"
// closed with one failure. Its clock is the real time, moved ahead by hand to end an open
// duration, so the dashboard's countdowns go down as they do in production.
func breakers(t *testing.T) *breaker.Registry {
	t.Helper()
	clock := &shiftedClock{}
	reg := breaker.NewRegistry(breaker.Config{OpenDuration: 5 * time.Minute, Clock: clock})
	fail := func(key string, n int) {
		for range n {
			p, err := reg.Gate(key)
			must(t, err)
			p.Failure()
		}
	}
	fail("search-index", 5)
	clock.shift(6 * time.Minute)
	fail("https://api.payments.example/v1/charge?region=eu", 5)
	clock.shift(20 * time.Second)
	fail("crm sync 100%", 5)
	fail("mailer", 1)
	for key, want := range map[string]breaker.State{"search-index": breaker.StateHalfOpen, "https://api.payments.example/v1/charge?region=eu": breaker.StateOpen,
		"crm sync 100%": breaker.StateOpen, "mailer": breaker.StateClosed} {
		if s, err := reg.Get(key); err != nil || s.State != want {
			t.Fatalf("breaker %q: %+v, %v; want %v", key, s, err, want)
		}
	}
	return reg
}

// shiftedClock is the real time moved ahead by shift.
type shiftedClock struct {
	mu sync.Mutex
	by time.Duration
}

func (c *shiftedClock) shift(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.by += d
}

func (c *shiftedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.by)
}

func (c *shiftedClock) After(d time.Duration) (<-chan time.Time, func() bool) {
	tm := time.NewTimer(d)
	return tm.C, tm.Stop
}

// record notes every state-changing request the handler accepted.
func (d *dashboard) record(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rw, r)
		if r.Method != http.MethodGet && r.Method != http.MethodHead && rw.status < 400 {
			d.mu.Lock()
			d.posts = append(d.posts, r.Method+" "+r.URL.Path)
			d.mu.Unlock()
		}
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	must(t, err)
	return loc
}
