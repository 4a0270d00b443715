package httpcall_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/switchboard-go/switchboard/httpcall"
	"github.com/switchboard-go/switchboard/mediator"
)

// A Call whose URL names no scheme or no host names no server: its key is "", not "://".
func TestAuthorityOfACallWithoutSchemeOrHostIsEmpty(t *testing.T) {
	for _, u := range []*url.URL{
		{Path: "/quotes"},
		{Scheme: "https", Path: "/quotes"},
		{Host: "api.example.com", Path: "/quotes"},
		{Scheme: "http", Host: ":8080"},
	} {
		c := &httpcall.Call{Request: &http.Request{Method: http.MethodGet, URL: u}}
		if got := httpcall.Authority(c); got != "" {
			t.Errorf("Authority of a Call to %q = %q, want \"\"", u, got)
		}
	}

	// The key the Transport computes once per call is the same.
	m := mediator.New(nil, mediator.Config{})
	var seen []string
	m.Use(mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
		seen = append(seen, httpcall.Authority(req))
		return next(ctx, req)
	}))
	mediator.HandleFunc(m, func(context.Context, *httpcall.Call) (*http.Response, error) {
		return nil, http.ErrNotSupported
	})
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	tr := httpcall.NewTransport(m, httpcall.Config{})
	if _, err := tr.RoundTrip(&http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/quotes"}, Header: http.Header{}}); err == nil {
		t.Fatal("RoundTrip succeeded, want the handler's error")
	}
	if len(seen) != 1 || seen[0] != "" {
		t.Errorf("Authority in the pipeline of a Transport call = %q, want [\"\"]", seen)
	}
}

// AuthorityOf gives a URL the key Authority gives a Call to it, and "" to a URL that names no
// server or does not parse.
func TestAuthorityOfAgreesWithAuthority(t *testing.T) {
	for _, raw := range []string{
		"https://API.Example.com/quotes?key=1",
		"HTTP://api.example.com",
		"http://api.example.com:8080/x",
		"https://user:secret@api.example.com:443/",
		"http://[::1]/",
		"http://[::1]:9000/",
		"ftp://files.example.com/a",
		"wss://Stream.example.com/feed",
	} {
		req, err := http.NewRequest(http.MethodPost, raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := httpcall.Authority(&httpcall.Call{Request: req})
		if got := httpcall.AuthorityOf(raw); got != want || got == "" {
			t.Errorf("AuthorityOf(%q) = %q, want %q (Authority's key)", raw, got, want)
		}
	}
	for _, raw := range []string{"", "/quotes", "api.example.com/quotes", "https:///quotes", "//api.example.com/x", "http://:8080", "mailto:ops@example.com", "http://[::1", "http://a b.com/", "%zz"} {
		if got := httpcall.AuthorityOf(raw); got != "" {
			t.Errorf("AuthorityOf(%q) = %q, want \"\"", raw, got)
		}
	}
}

// The key the Transport computes once per call is read back without an allocation.
func TestAuthorityOfATransportCallAllocatesNothing(t *testing.T) {
	m := mediator.New(nil, mediator.Config{})
	allocs := -1.0
	m.Use(mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
		allocs = testing.AllocsPerRun(100, func() { _ = httpcall.Authority(req) })
		return next(ctx, req)
	}))
	mediator.HandleFunc(m, func(context.Context, *httpcall.Call) (*http.Response, error) {
		return nil, http.ErrNotSupported
	})
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, "https://API.example.com/quotes", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = httpcall.NewTransport(m, httpcall.Config{}).RoundTrip(req)
	if allocs != 0 {
		t.Errorf("Authority of a Transport call: %v allocations, want 0", allocs)
	}
}
