package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// line is what became of the requests to one endpoint: every request sent is in exactly one
// of the columns after sent.
type line struct {
	Endpoint  string
	Sent      int
	First     int // succeeded at the first attempt
	Retried   int // succeeded after in-process retries
	FellBack  int // a Quote the fallback answered
	Status4xx int // a delivery the endpoint refused with a 4xx answer, not retried
	Failed    int // failed outright (a Quote with no rate to fall back on)
	Deferred  int // stored by the deferral (the sum of the next four)
	// What became of the deferred deliveries.
	DeferredOK int // the scheduler delivered it
	ReplayedOK int // it died, and a replay delivered it
	Dead       int // a dead letter still
	Waiting    int // still in the queue
	Unknown    int // in no state the demo knows: counted as unaccounted
	Trips      int // openings of the endpoint's breaker
	// The endpoint's own view, to check the columns against.
	Accepted  int // distinct deliveries it accepted
	Again     int // those it accepted more than once, after an attempt that got no answer
	Twice     int // those it accepted more than once without one: sent twice by mistake
	delivered int // deliveries among First and Retried
}

// report is the run's summary.
type report struct {
	Lines         []line
	Total         line
	fails         []string
	spans, traces int
	series        int // metric series /metrics served
	logLines      int
}

// report counts what became of every request: the in-process outcomes, then the state of each
// deferred item and of its dead letter.
func (d *demo) report(ctx context.Context) (*report, error) {
	status := map[record.ItemID]record.DeadLetterStatus{}
	for _, s := range []record.DeadLetterStatus{record.DeadLetterFailed, record.DeadLetterReplayed, record.DeadLetterDiscarded} {
		for offset := 0; ; {
			page, err := d.queue.DeadLetters(ctx, durable.DeadLetterFilter{Status: s, Source: source, Limit: 500, Offset: offset})
			if err != nil {
				return nil, err
			}
			for _, l := range page.Letters {
				status[l.ItemID] = s
			}
			if len(page.Letters) < 500 {
				break
			}
			offset += len(page.Letters)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	rep := &report{fails: d.fails, Total: line{Endpoint: "total"}}
	for _, e := range d.eps {
		r := d.rows[e.name]
		l := line{Endpoint: e.name, Sent: r.sent, First: r.first, Retried: r.retried, FellBack: r.fellBack,
			Status4xx: r.clientError, Failed: r.failed, Deferred: len(r.deferred), Trips: d.trips[e.name], delivered: r.delivered}
		for _, id := range r.deferred {
			it, err := d.queue.Item(ctx, id)
			if err != nil {
				return nil, fmt.Errorf("deferred item %d: %w", id, err)
			}
			switch {
			case it.State == record.StateSucceeded:
				l.DeferredOK++
			case it.State == record.StatePending || it.State == record.StateRunning:
				l.Waiting++
			case it.State == record.StateDead && status[id] == record.DeadLetterReplayed:
				l.ReplayedOK++
			case it.State == record.StateDead && status[id] == record.DeadLetterFailed:
				l.Dead++
			default:
				l.Unknown++
			}
		}
		l.Accepted, l.Again, l.Twice = e.deliveries(d.unanswered.had)
		rep.Lines = append(rep.Lines, l)
		rep.Total.add(l)
	}
	return rep, nil
}

func (t *line) add(l line) {
	t.Sent += l.Sent
	t.First += l.First
	t.Retried += l.Retried
	t.FellBack += l.FellBack
	t.Status4xx += l.Status4xx
	t.Failed += l.Failed
	t.Deferred += l.Deferred
	t.DeferredOK += l.DeferredOK
	t.ReplayedOK += l.ReplayedOK
	t.Dead += l.Dead
	t.Waiting += l.Waiting
	t.Unknown += l.Unknown
	t.Trips += l.Trips
	t.Accepted += l.Accepted
	t.Again += l.Again
	t.Twice += l.Twice
	t.delivered += l.delivered
}

// check says whether every request is accounted for: the columns add up to the requests sent,
// and the endpoints accepted each delivery that succeeded here exactly once.
func (r *report) check() error {
	var errs []error
	for _, l := range append(r.Lines, r.Total) {
		if got := l.First + l.Retried + l.FellBack + l.Status4xx + l.Failed + l.Deferred; got != l.Sent {
			errs = append(errs, fmt.Errorf("%s: %d requests sent, %d accounted for", l.Endpoint, l.Sent, got))
		}
		if got := l.DeferredOK + l.ReplayedOK + l.Dead + l.Waiting; got != l.Deferred {
			errs = append(errs, fmt.Errorf("%s: %d deliveries deferred, %d found in the queue in a known state", l.Endpoint, l.Deferred, got))
		}
		if ok := l.delivered + l.DeferredOK + l.ReplayedOK; ok != l.Accepted {
			errs = append(errs, fmt.Errorf("%s: %d deliveries succeeded here, the endpoint accepted %d", l.Endpoint, ok, l.Accepted))
		}
		if l.Twice > 0 {
			errs = append(errs, fmt.Errorf("%s: %d deliveries were accepted twice, though every attempt before the last was answered", l.Endpoint, l.Twice))
		}
	}
	return errors.Join(errs...)
}

func (r *report) print(w io.Writer, d *demo) {
	fmt.Fprintf(w, "\nsummary after %s: what became of each request\n\n", d.elapsed())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "endpoint\tsent\t1st try\tretried\tfell back\t4xx\tfailed\t| deferred: delivered\treplayed\tdead\twaiting\t| breaker trips\t")
	for _, l := range append(r.Lines, r.Total) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", l.Endpoint, l.Sent, l.First, l.Retried, l.FellBack,
			l.Status4xx, l.Failed, l.DeferredOK, l.ReplayedOK, l.Dead, l.Waiting, l.Trips)
	}
	_ = tw.Flush()
	t := r.Total
	fmt.Fprintf(w, "\n  %d sent = %d at the first try + %d after retries + %d fell back + %d refused by the endpoint (4xx) + %d failed + %d deferred\n",
		t.Sent, t.First, t.Retried, t.FellBack, t.Status4xx, t.Failed, t.Deferred)
	fmt.Fprintf(w, "  %d deferred = %d delivered by the scheduler + %d replayed from dead letters + %d still dead letters + %d waiting in the queue\n",
		t.Deferred, t.DeferredOK, t.ReplayedOK, t.Dead, t.Waiting)
	fmt.Fprintf(w, "  the endpoints accepted %d distinct deliveries; %d of them again after an attempt that got no answer (the copies their Delivery-Id lets an endpoint drop), %d twice otherwise\n", t.Accepted, t.Again, t.Twice)
	for _, f := range r.fails {
		fmt.Fprintf(w, "  failed: %s\n", f)
	}
	fmt.Fprintf(w, "  traces: %d spans in %d traces; metrics: %d series at /metrics; logs: %d lines\n", r.spans, r.traces, r.series, r.logLines)
	if t.Waiting > 0 {
		fmt.Fprintf(w, "  the %d waiting deliveries stay in %s; their endpoints end with this run\n", t.Waiting, filepath.Join(d.opt.dir, "queue.db"))
	}
	if err := r.check(); err != nil {
		fmt.Fprintf(w, "\nNOT ACCOUNTED FOR:\n%v\n", err)
		return
	}
	fmt.Fprintf(w, "\nevery request is accounted for.\n")
}

// scrapeCount scrapes /metrics as Prometheus would and counts the series of switchboard.
func scrapeCount(base, token string) int {
	req, err := http.NewRequest(http.MethodGet, base+"metrics", nil)
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	n := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "switchboard_") {
			n++
		}
	}
	return n
}

func countLines(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		n++
	}
	return n
}
