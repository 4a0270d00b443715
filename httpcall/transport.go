package httpcall

import (
	"net/http"

	"github.com/switchboard-go/switchboard/mediator"
)

// Config configures NewTransport. The zero Config is complete.
type Config struct {
	// Base performs the round trips of this transport's calls, for clients that need their own
	// connection pool, proxy or TLS settings while sharing the pipeline of *Call. nil: the base
	// given to Register (http.DefaultTransport when that is nil too), so that every client of
	// the process shares one pool of connections unless it asks otherwise.
	Base http.RoundTripper
}

// Transport is an http.RoundTripper that sends every request through a mediator pipeline as a
// *Call, so that an http.Client gets the behaviors registered for *Call (fallback, retry,
// breaker, timeout, ...) with one line:
//
//	client := &http.Client{Transport: httpcall.NewTransport(m, httpcall.Config{})}
//
// The handler registered by Register performs the round trip. A response with an error status
// (see FromResponse) reaches the client as an error, after the pipeline has done what it can;
// other responses reach it unchanged.
type Transport struct {
	s    mediator.Sender
	base http.RoundTripper
}

// NewTransport returns a Transport that sends through s, usually the *mediator.Mediator with
// the handler of Register; requests sent before s is built fail with mediator.ErrNotBuilt.
// It panics when s is nil.
func NewTransport(s mediator.Sender, cfg Config) *Transport {
	if s == nil {
		panic("httpcall: NewTransport with a nil sender")
	}
	return &Transport{s: s, base: cfg.Base}
}

// RoundTrip implements http.RoundTripper: it sends req as a *Call through the pipeline under
// req's context. A request whose body cannot be replayed (Body set, GetBody nil) is marked
// mediator.SingleAttempt, so that it is sent at most once; http.NewRequest sets GetBody for the
// bodies it can replay (bytes.Buffer, bytes.Reader, strings.Reader). The cancellation of req's
// context is the caller's: it is never retried and never counted by a breaker. As the
// RoundTripper contract asks, req's body is closed also when the pipeline refuses the call
// before a round trip (an open breaker, a full bulkhead).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := &Call{Request: req, base: t.base}
	if req.URL != nil {
		c.key = authority(req.URL)
	}
	ctx := req.Context()
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		ctx = mediator.WithMarks(ctx, c, mediator.SingleAttempt)
	}
	resp, err := mediator.Send(ctx, t.s, c)
	if err != nil {
		if c.attempts.Load() == 0 && req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	return resp, nil
}

// CloseIdleConnections closes the idle connections of Config.Base, when it has such a method,
// so that http.Client.CloseIdleConnections reaches it. The base given to Register is shared by
// every transport without one, and is its owner's to close.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
