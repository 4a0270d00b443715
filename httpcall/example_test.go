package httpcall_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
	"github.com/switchboard-go/switchboard/httpcall"
	"github.com/switchboard-go/switchboard/mediator"
)

// An http.Client gets retry, a breaker per host and a timeout per attempt from the mediator
// with one line. The server is busy on the first call; the retry's second attempt succeeds.
func Example() {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "quote: 42")
	}))
	defer srv.Close()

	m := mediator.New(nil, mediator.Config{})
	httpcall.Register(m, nil) // the handler of *httpcall.Call: the round trip, on http.DefaultTransport
	m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond}}))
	m.Use(breaker.New(breaker.NewRegistry(breaker.Config{Key: httpcall.Authority}))) // one breaker per host
	m.Use(timeout.New(timeout.Config{Duration: 5 * time.Second}))                    // per attempt
	if err := m.Build(); err != nil {
		fmt.Println(err)
		return
	}

	client := &http.Client{Transport: httpcall.NewTransport(m, httpcall.Config{})}

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), "after", calls.Load(), "calls")
	// Output:
	// 200 quote: 42 after 2 calls
}

// FromResponse turns a response whose status says the server failed into a *StatusError,
// for code that uses an http.Client of its own; it closes that response's body.
func ExampleFromResponse() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/quotes?api_key=secret")
	if err != nil {
		fmt.Println(err)
		return
	}
	err = httpcall.FromResponse(resp) // nil for 2xx, 3xx and most 4xx: then resp is the caller's
	var se *httpcall.StatusError
	if errors.As(err, &se) {
		fmt.Println(se.Code, se.RetryAfter(), se.URL == srv.URL+"/quotes")
	}
	// Output:
	// 429 30s true
}

// AuthorityOf gives a URL the key Authority gives a *Call to it, for a key function outside the
// pipeline of *Call, such as a durable registration's over a request that carries the URL it
// posts to: both name the same per-host breaker.
func ExampleAuthorityOf() {
	fmt.Println(httpcall.AuthorityOf("https://Hooks.example.com/deliver?sig=secret"))
	fmt.Println(httpcall.AuthorityOf("http://hooks.example.com:8080/deliver"))
	fmt.Printf("%q\n", httpcall.AuthorityOf("/deliver")) // no scheme, no host: no breaker
	// Output:
	// https://hooks.example.com:443
	// http://hooks.example.com:8080
	// ""
}
