package durable_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/httpcall"
	"github.com/switchboard-go/switchboard/mediator"
)

// An HTTP front sends a Notice whose provider hangs: the in-process attempts (two of 100 ms
// each, timeouts retried) end in per-attempt timeouts, which the queue's policy retries.
//
//   - When the Send has no deadline of its own (the request's context, which ends only when
//     the client goes), the request is deferred: 202 and one item.
//   - When the front gives the Send a deadline shorter than the attempts take (150 ms), that
//     deadline is the caller's: it passes during the second attempt, the deferral does not
//     store the request (its caller gave up), and the front, whose client still waits,
//     answers 504. The error says that it was not deferred and why, so that the log line of
//     the failure does; it is still the caller's cancellation (context.DeadlineExceeded,
//     mediator.IsCallerCancellation), observed as "cancelled".
func TestDeferralSaysACallersDeadlineKeptItFromDeferring(t *testing.T) {
	hung := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done() // until the relay's attempt gives up
	}))
	defer hung.Close()

	q := sqliteBackend(t).bare(t, durable.Config{})
	durable.Register[*Notice](q, "relay.notice")
	m := mediator.New(nil, mediator.Config{})
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	httpcall.Register(m, base)
	call := mediator.ForRequest[*httpcall.Call]()
	m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 2, BaseDelay: 10 * time.Millisecond, RetryOnTimeout: behaviors.On}}), call)
	m.Use(timeout.New(timeout.Config{Duration: 100 * time.Millisecond}), call) // per attempt
	client := &http.Client{Transport: httpcall.NewTransport(m, httpcall.Config{})}
	mediator.HandleFunc(m, func(ctx context.Context, n *Notice) (mediator.Void, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.URL, strings.NewReader("{}"))
		if err != nil {
			return mediator.Void{}, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return mediator.Void{}, err
		}
		resp.Body.Close()
		return mediator.Void{}, nil
	})
	var outcome string
	m.Use(mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
		resp, err := next(ctx, req)
		outcome = behaviors.OutcomeOf(ctx, req, err) // as the logging behavior sees it
		return resp, err
	}), mediator.ForRequest[*Notice](), mediator.WithOrder(behaviors.DeferralOrder-1))
	m.Use(durable.NewDeferral(q, durable.DeferralConfig{}), mediator.ForRequest[*Notice]())
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name     string
		deadline time.Duration // of the front's Send; 0: none
		code     int
		items    int64 // in the queue after it
	}{
		{"without a deadline of the front", 0, http.StatusAccepted, 1},
		{"with a deadline of the front shorter than the attempts", 150 * time.Millisecond, http.StatusGatewayTimeout, 1}, // nothing more,
	} {
		var sendErr error
		var ctxErr error
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			if c.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, c.deadline)
				defer cancel()
			}
			_, sendErr = mediator.Send(ctx, m, &Notice{ID: c.name, URL: hung.URL})
			ctxErr = ctx.Err()
			httpcall.WriteError(w, r, sendErr)
		}))
		resp, err := http.Post(front.URL, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		front.Close()
		if resp.StatusCode != c.code {
			t.Errorf("%s: answered %d, want %d; Send: %v", c.name, resp.StatusCode, c.code, sendErr)
		}
		if n := stats(t, q).Counts; n["pending"]+n["running"]+n["succeeded"]+n["dead"] != c.items {
			t.Errorf("%s: items %v, want %d in all", c.name, n, c.items)
		}
		if c.deadline == 0 {
			continue
		}
		const why = "not deferred: the caller's deadline passed before its in-process attempts ended"
		if !strings.Contains(sendErr.Error(), why) {
			t.Errorf("%s: the error does not say why it was not deferred (%q): %v", c.name, why, sendErr)
		}
		if ctxErr == nil || !errors.Is(sendErr, context.DeadlineExceeded) || !behaviors.IsTimeout(sendErr) {
			t.Errorf("%s: the front's context %v, Send %v: want the caller's deadline", c.name, ctxErr, sendErr)
		}
		if outcome != behaviors.OutcomeCancelled {
			t.Errorf("%s: outcome %q, want %q", c.name, outcome, behaviors.OutcomeCancelled)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}
