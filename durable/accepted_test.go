package durable_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/httpcall"
)

// TestDeferredErrorIsAccepted: a DeferredError is an httpcall.Accepted, found through the
// wrapping of a handler and errors.Join; it names its item in decimal, and WriteError answers
// it 202 Accepted with that id.
func TestDeferredErrorIsAccepted(t *testing.T) {
	deferred := &durable.DeferredError{ItemID: 9007199254740993, Token: "t", Cause: errors.New("down")}
	for _, err := range []error{
		deferred,
		fmt.Errorf("deliver: %w", deferred),
		fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", deferred)),
		errors.Join(errors.New("other"), deferred),
	} {
		a, ok := errors.AsType[httpcall.Accepted](err)
		if !ok {
			t.Fatalf("errors.As(%v, httpcall.Accepted) found nothing", err)
		}
		if got := a.AcceptedID(); got != "9007199254740993" {
			t.Errorf("AcceptedID = %q, want the item id in decimal", got)
		}
		w := httptest.NewRecorder()
		if !httpcall.WriteError(w, httptest.NewRequest(http.MethodPost, "/work", nil), err) {
			t.Fatalf("WriteError(%v) wrote nothing", err)
		}
		if want := `{"id":"9007199254740993"}` + "\n"; w.Code != http.StatusAccepted || w.Body.String() != want {
			t.Errorf("answer %d %q, want 202 %q", w.Code, w.Body, want)
		}
	}
}
