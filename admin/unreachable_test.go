package admin_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/mediator"
)

// refusingQueue is a queue whose database refuses connections.
type refusingQueue struct{ admin.Operations }

func (refusingQueue) Stats(ctx context.Context) (durable.Stats, error) {
	return durable.Stats{}, fmt.Errorf("durable: stats: failed to connect: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
}

// A database that does not answer is an outage the operator should see named: 503 saying
// so, not "500 internal error; the server log has the details", which sent a user with
// PostgreSQL stopped looking through logs.
func TestDatabaseDownIsA503NamingIt(t *testing.T) {
	h, err := admin.New(admin.Config{Queue: refusingQueue{}, Sender: mediator.New(nil, mediator.Config{}), Token: token})
	must(t, err)
	res := auth(t, h, "GET", "/api/queue", "")
	want(t, res, http.StatusServiceUnavailable)
	if msg := errorOf(res); !strings.Contains(msg, "the queue's database does not answer") {
		t.Errorf("the 503 says %q", msg)
	}
}

// flakyQueue is a queue whose database stops answering while down is set.
type flakyQueue struct {
	admin.Operations
	down *atomic.Bool
}

func (q flakyQueue) refused() error {
	return fmt.Errorf("durable: failed to connect: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
}

func (q flakyQueue) Stats(ctx context.Context) (durable.Stats, error) {
	if q.down.Load() {
		return durable.Stats{}, q.refused()
	}
	return q.Operations.Stats(ctx)
}

func (q flakyQueue) DeadLetters(ctx context.Context, f durable.DeadLetterFilter) (durable.DeadLetterPage, error) {
	if q.down.Load() {
		return durable.DeadLetterPage{}, q.refused()
	}
	return q.Operations.DeadLetters(ctx, f)
}

// While the queue's database does not answer, the Now panel says so first; when it answers
// again the line goes.
func TestDashboardNowSaysTheDatabaseIsDown(t *testing.T) {
	f := newFixture(t, durableConfig())
	var down atomic.Bool
	h, err := admin.New(admin.Config{Queue: flakyQueue{f.q, &down}, Breakers: f.reg, Sender: f.m, Token: testToken})
	must(t, err)
	tab := serveAndLogIn(t, h, chromedp.WaitVisible(chromedp.ID("now-list")))
	down.Store(true)
	must(t, chromedp.Do(tab, poll(`document.querySelector("#now-list li[data-kind=database]")`)))
	text, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS(`#now-list li:first-child`)))
	must(t, err)
	if !strings.Contains(text, "The queue's database does not answer") {
		t.Errorf("the first line reads %q", text)
	}
	down.Store(false)
	must(t, chromedp.Do(tab, poll(`!document.querySelector("#now-list li[data-kind=database]")`)))
}
