package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"time"
)

// QueueState is what the queue checks ask of a durable queue; a *durable.Queue is one.
// Depending on these two methods alone, this package links no database driver.
type QueueState interface {
	// MissingMigrations returns the migrations this version embeds that the database lacks.
	MissingMigrations(ctx context.Context) ([]int, error)
	// Scheduling reports whether the queue's scheduler runs.
	Scheduling() bool
}

// The names of the readiness checks Config.Queue adds.
const (
	storeCheck      = "store"
	migrationsCheck = "migrations"
	schedulerCheck  = "scheduler"
)

// Check is one named check. Run returns nil when what it checks is fine; it must honour ctx,
// which ends at Config.Timeout (a check that ignores it is reported as timed out when the
// timeout passes, but its goroutine lives on until Run returns).
type Check struct {
	// Name names the check in the Report; unique among a handler's checks.
	Name string
	// Run performs the check.
	Run func(ctx context.Context) error
}

// Config configures Probes. The zero value is complete: a liveness probe that always passes and
// a readiness probe that checks nothing.
type Config struct {
	// Queue, when set, adds three readiness checks: "store" (its database answers a query
	// within Timeout), "migrations" (the database has every migration this version of durable
	// embeds: Queue.MissingMigrations) and "scheduler" (Queue.Start succeeded and Shutdown has
	// not been called: Queue.Scheduling). Give it the *durable.Queue. Default nil: no queue
	// checks.
	Queue QueueState
	// EnqueueOnly leaves the "scheduler" check out, for instances that enqueue into the queue
	// and run no scheduler. Default false: an instance with a queue is expected to schedule, as
	// durable recommends (Start in every instance).
	EnqueueOnly bool
	// Timeout bounds every check of one probe; a check still running then is reported with
	// StatusTimeout, and the probe answers at once. Default 800 ms: under the 1 s default of a
	// Kubernetes probe's timeoutSeconds, so the orchestrator receives the 503 naming the slow
	// check instead of giving up on the request without a body, and far above the few
	// milliseconds a healthy database needs to answer. Keep it under the probe's timeout when
	// you raise either.
	Timeout time.Duration
	// Checks are the application's own readiness checks (a cache, a downstream it cannot serve
	// without), run beside the queue's. Default none.
	Checks []Check
	// LivenessChecks are checks that only a restart can fix (a deadlocked loop, a wedged
	// worker pool). They must not consult a database or any other dependency: see the package
	// doc. Default none: liveness passes while the process can answer HTTP.
	LivenessChecks []Check
}

// Validate reports every problem of cfg, joined, each naming its field: a negative Timeout, a
// check without a name or Run, two checks of one name in one probe (the queue's names
// included). New calls it.
func (cfg Config) Validate() error {
	var errs []error
	if cfg.Timeout < 0 {
		errs = append(errs, fmt.Errorf("health: Config.Timeout %v is negative", cfg.Timeout))
	}
	if nilValue(cfg.Queue) {
		// A nil *durable.Queue in the interface is not a missing queue: its checks would
		// panic at the first probe.
		errs = append(errs, fmt.Errorf("health: Config.Queue is a nil %T: leave it unset, or pass the open queue", cfg.Queue))
	}
	errs = append(errs, validateChecks("Checks", cfg.queueChecks(), cfg.Checks)...)
	errs = append(errs, validateChecks("LivenessChecks", nil, cfg.LivenessChecks)...)
	return errors.Join(errs...)
}

// nilValue reports whether v holds a nil pointer: set, but to nothing (every implementation
// of the fields' interfaces in this module is a pointer).
func nilValue(v any) bool {
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}

func validateChecks(field string, builtin, checks []Check) []error {
	var errs []error
	seen := map[string]bool{}
	for _, c := range builtin {
		seen[c.Name] = true
	}
	for i, c := range checks {
		switch {
		case c.Name == "":
			errs = append(errs, fmt.Errorf("health: Config.%s[%d] has no Name", field, i))
		case seen[c.Name]:
			errs = append(errs, fmt.Errorf("health: Config.%s[%d]: a check named %q is already in the probe", field, i, c.Name))
		}
		seen[c.Name] = true
		if c.Run == nil {
			errs = append(errs, fmt.Errorf("health: Config.%s[%d] (%q) has no Run", field, i, c.Name))
		}
	}
	return errs
}

// queueChecks returns the readiness checks of cfg.Queue.
func (cfg Config) queueChecks() []Check {
	q := cfg.Queue
	if q == nil {
		return nil
	}
	checks := []Check{
		{Name: storeCheck, Run: func(ctx context.Context) error {
			_, err := q.MissingMigrations(ctx)
			return err
		}},
		{Name: migrationsCheck, Run: func(ctx context.Context) error {
			missing, err := q.MissingMigrations(ctx)
			if err != nil {
				return fmt.Errorf("not known: the store did not answer: %w", err)
			}
			if len(missing) > 0 {
				return fmt.Errorf("the database lacks migrations %v: run the driver package's Migrate (or apply its MigrationSQL) first", missing)
			}
			return nil
		}},
	}
	if !cfg.EnqueueOnly {
		checks = append(checks, Check{Name: schedulerCheck, Run: func(context.Context) error {
			if !q.Scheduling() {
				return errors.New("not running: Queue.Start was not called or Queue.Shutdown was")
			}
			return nil
		}})
	}
	return checks
}

// Status is the outcome of one check, or of a whole probe.
type Status string

// The statuses of a check; a Report is StatusOK or StatusFailed.
const (
	// StatusOK: the check passed.
	StatusOK Status = "ok"
	// StatusFailed: the check returned an error (or panicked).
	StatusFailed Status = "failed"
	// StatusTimeout: the check had not returned when the timeout passed.
	StatusTimeout Status = "timeout"
)

// Report is what a probe found, and the JSON body of its response.
type Report struct {
	// Status is StatusOK when every check passed, else StatusFailed.
	Status Status `json:"status"`
	// Checks holds one entry per check, in the order of Config (the queue's first).
	Checks []CheckReport `json:"checks"`
}

// CheckReport is the outcome of one check.
type CheckReport struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Duration is how long the check ran (the timeout, for one that timed out), in the JSON as
	// a Go duration string ("1.5ms").
	Duration time.Duration `json:"-"`
	// Error is the check's error; empty when it passed.
	Error string `json:"error,omitempty"`
}

// MarshalJSON writes Duration as a Go duration string.
func (c CheckReport) MarshalJSON() ([]byte, error) {
	type plain CheckReport
	return json.Marshal(struct {
		plain
		Duration string `json:"duration"`
	}{plain(c), c.Duration.String()})
}

// UnmarshalJSON reads what MarshalJSON writes, so a client may decode a probe's body into a
// Report.
func (c *CheckReport) UnmarshalJSON(data []byte) error {
	type plain CheckReport
	var v struct {
		plain
		Duration string `json:"duration"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*c = CheckReport(v.plain)
	if v.Duration != "" {
		d, err := time.ParseDuration(v.Duration)
		if err != nil {
			return fmt.Errorf("health: check %q: duration: %w", v.Name, err)
		}
		c.Duration = d
	}
	return nil
}

// Probes holds the liveness and readiness checks of one instance. Its methods are safe for
// concurrent use.
type Probes struct {
	timeout   time.Duration
	readiness []Check
	liveness  []Check
}

// New returns the Probes cfg describes, or cfg's problems (see Config.Validate).
func New(cfg Config) (*Probes, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Probes{timeout: cfg.Timeout, liveness: append([]Check(nil), cfg.LivenessChecks...)}
	if p.timeout == 0 {
		p.timeout = 800 * time.Millisecond
	}
	p.readiness = append(cfg.queueChecks(), cfg.Checks...)
	return p, nil
}

// Ready runs the readiness checks and reports what they found.
func (p *Probes) Ready(ctx context.Context) Report { return run(ctx, p.timeout, p.readiness) }

// Live runs the liveness checks and reports what they found.
func (p *Probes) Live(ctx context.Context) Report { return run(ctx, p.timeout, p.liveness) }

// Readiness returns the handler of the readiness probe (mount it at /readyz): 200 when every
// readiness check passes, 503 otherwise, with the Report as JSON.
func (p *Probes) Readiness() http.Handler { return handler(p.Ready) }

// Liveness returns the handler of the liveness probe (mount it at /livez): 200 when every
// liveness check passes, 503 otherwise, with the Report as JSON. It consults no database.
func (p *Probes) Liveness() http.Handler { return handler(p.Live) }

// handler serves the Report of probe to GET and HEAD, never cached.
func handler(probe func(context.Context) Report) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed: use GET or HEAD", http.StatusMethodNotAllowed)
			return
		}
		rep := probe(r.Context())
		body, err := json.Marshal(rep)
		if err != nil { // a Report always marshals; answer honestly if it ever does not
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		h.Set("Content-Type", "application/json")
		code := http.StatusOK
		if rep.Status != StatusOK {
			code = http.StatusServiceUnavailable
		}
		w.WriteHeader(code)
		if r.Method == http.MethodGet {
			_, _ = w.Write(append(body, '\n'))
		}
	})
}

// run runs checks concurrently, each bounded by timeout (and ctx), and returns once each has
// returned or the timeout has passed, whichever is first.
func run(parent context.Context, timeout time.Duration, checks []Check) Report {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	rep := Report{Status: StatusOK, Checks: make([]CheckReport, len(checks))}
	type done struct {
		i   int
		err error
		d   time.Duration
	}
	results := make(chan done, len(checks)) // buffered: a check ending after the timeout never blocks
	start := time.Now()
	for i, c := range checks {
		rep.Checks[i] = CheckReport{Name: c.Name, Status: StatusTimeout}
		go func() {
			t := time.Now()
			err := protect(ctx, c.Run)
			results <- done{i, err, time.Since(t)}
		}()
	}
	for range checks {
		select {
		case r := <-results:
			cr := &rep.Checks[r.i]
			cr.Duration, cr.Status = r.d, StatusOK
			if r.err != nil {
				cr.Status, cr.Error = StatusFailed, r.err.Error()
				if ctx.Err() != nil && errors.Is(r.err, ctx.Err()) {
					cr.Status, cr.Error = StatusTimeout, timeoutError(parent, timeout)+": "+cr.Error
				}
			}
		case <-ctx.Done():
			elapsed := time.Since(start)
			for i := range rep.Checks {
				if cr := &rep.Checks[i]; cr.Status == StatusTimeout && cr.Error == "" {
					cr.Duration = elapsed
					cr.Error = timeoutError(parent, timeout)
				}
			}
			rep.Status = StatusFailed
			return rep
		}
	}
	for i := range rep.Checks {
		if cr := &rep.Checks[i]; cr.Status != StatusOK {
			rep.Status = StatusFailed
		}
	}
	return rep
}

// timeoutError says why a check did not finish: the probe's timeout, or the end of the
// probe's request (parent) before it.
func timeoutError(parent context.Context, timeout time.Duration) string {
	if err := parent.Err(); err != nil {
		return fmt.Sprintf("did not finish: the probe's request ended (%v)", context.Cause(parent))
	}
	return fmt.Sprintf("did not finish within %v", timeout)
}

// protect calls run, turning a panic into an error: a check that panics fails, it does not
// crash the process serving the probe.
func protect(ctx context.Context, run func(context.Context) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return run(ctx)
}
