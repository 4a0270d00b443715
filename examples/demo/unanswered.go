package main

import (
	"net/http"
	"sync"
)

// unanswered is the client's base transport: it remembers the deliveries of which a round trip
// got no answer (the attempt timed out, or its connection broke, after the request went out).
// The endpoint may have accepted such an attempt, so the next one can reach it a second time:
// that copy is what at-least-once delivery sends and what the endpoint drops by its
// Delivery-Id. A delivery the endpoint accepted twice without one is a delivery sent twice
// by mistake, which the summary's check fails on.
type unanswered struct {
	base http.RoundTripper
	mu   sync.Mutex
	ids  map[string]bool
}

func newUnanswered(base http.RoundTripper) *unanswered {
	return &unanswered{base: base, ids: map[string]bool{}}
}

// RoundTrip sends r through the base transport and remembers r's Delivery-Id when no answer came.
func (u *unanswered) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := u.base.RoundTrip(r)
	if id := r.Header.Get("Delivery-Id"); err != nil && id != "" {
		u.mu.Lock()
		u.ids[id] = true
		u.mu.Unlock()
	}
	return resp, err
}

// had reports whether an attempt of the delivery id got no answer.
func (u *unanswered) had(id string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.ids[id]
}

// CloseIdleConnections closes the base transport's idle connections.
func (u *unanswered) CloseIdleConnections() {
	if c, ok := u.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
