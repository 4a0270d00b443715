package httpcall_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/validation"
	"github.com/switchboard-go/switchboard/httpcall"
	"github.com/switchboard-go/switchboard/mediator"
)

// Deliver asks for an event to be posted to a subscriber's URL.
type Deliver struct {
	mediator.Returns[string]
	URL string
}

// Validate implements validation.Validator.
func (d *Deliver) Validate() error {
	if d.URL == "" {
		return errors.New("url is required")
	}
	return nil
}

// A net/http handler sends its request through the mediator and answers Send's error with
// WriteError: 422 for a request that fails validation, 503 with Retry-After while the breaker
// is open (202 with the item id for a request a durable deferral stored, 504 for a timeout,
// 500 for the rest), and nothing when the client has gone.
func ExampleWriteError() {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, d *Deliver) (string, error) {
		return "delivered to " + d.URL, nil
	})
	m.Use(validation.New())
	breakers := breaker.NewRegistry(breaker.Config{OpenDuration: 30 * time.Second})
	m.Use(breaker.New(breakers))
	if err := m.Build(); err != nil {
		fmt.Println(err)
		return
	}

	handler := func(w http.ResponseWriter, r *http.Request) {
		receipt, err := mediator.Send(r.Context(), m, &Deliver{URL: r.FormValue("url")})
		if err != nil {
			httpcall.WriteError(w, r, err) // the status, Retry-After and a JSON body; nothing if the client is gone
			return
		}
		fmt.Fprintln(w, receipt)
	}

	post := func(target string) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/events", strings.NewReader(url.Values{"url": {target}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		handler(w, r)
		fmt.Print(w.Code, " ", w.Header().Get("Retry-After"), " ", w.Body.String())
	}
	post("https://hooks.example.com/a")
	post("")
	_ = breakers.Trip(behaviors.TypeKey(reflect.TypeFor[*Deliver]())) // as failures of its dependency would
	post("https://hooks.example.com/a")
	// Output:
	// 200  delivered to https://hooks.example.com/a
	// 422  {"error":"url is required"}
	// 503 30 {"error":"Service Unavailable"}
}

// StatusOf gives the status and headers alone, for a handler that writes its own body.
func ExampleStatusOf() {
	code, header := httpcall.StatusOf(fmt.Errorf("deliver: %w", &breaker.OpenError{Key: "https://hooks.example.com:443", Remaining: 1200 * time.Millisecond}))
	fmt.Println(code, header.Get("Retry-After"))
	code, header = httpcall.StatusOf(context.DeadlineExceeded)
	fmt.Println(code, header == nil)
	// Output:
	// 503 2
	// 504 true
}
