package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
	"github.com/switchboard-go/switchboard/durable/record"
)

// downQueue is an admin.Operations whose database is down: every call fails.
type downQueue struct{ admin.Operations }

var errDown = errors.New("database is down")

func (downQueue) Stats(context.Context) (durable.Stats, error) { return durable.Stats{}, errDown }

// The handler calls the queue through admin.Operations alone, and without a Logger it logs to
// zap.L(), the process's global logger, as every package of the module does.
func TestDefaultLoggerIsTheGlobalOne(t *testing.T) {
	core, logs := observer.New(zap.ErrorLevel)
	defer zap.ReplaceGlobals(zap.New(core))()
	h, err := admin.New(admin.Config{Queue: downQueue{}, Sender: nopSender{}, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	want(t, auth(t, h, "GET", "/api/queue", ""), http.StatusInternalServerError)
	entries := logs.FilterMessage("admin: request failed").All()
	if len(entries) != 1 || entries[0].ContextMap()["error"] != errDown.Error() {
		t.Fatalf("global logger received %+v; want one entry naming the database error", logs.All())
	}
}

// Config.Clock is a behaviors.Clock: a session ends when the clock given says SessionTTL has
// passed, with no waiting.
func TestSessionsEndOnTheConfiguredClock(t *testing.T) {
	clock := durabletest.NewManualClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	h, err := admin.New(admin.Config{Queue: downQueue{}, Sender: nopSender{}, Token: token, Clock: clock, SessionTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	res := auth(t, h, "POST", "/api/session", "")
	want(t, res, http.StatusOK)
	c := res.Result().Cookies()[0]
	cookie := c.Name + "=" + c.Value
	want(t, do(t, h, "GET", "/api/session", "", "Cookie", cookie), http.StatusOK)
	clock.Advance(59 * time.Minute)
	want(t, do(t, h, "GET", "/api/session", "", "Cookie", cookie), http.StatusOK)
	clock.Advance(time.Minute)
	want(t, do(t, h, "GET", "/api/session", "", "Cookie", cookie), http.StatusUnauthorized)
}

// nopSender is a mediator.Sender for handlers that replay nothing.
type nopSender struct{}

func (nopSender) SendAny(context.Context, any) (any, error) { return nil, nil }

// hungQueue is an admin.Operations whose database does not answer: a call returns when its
// context ends, with the context's error.
type hungQueue struct{ admin.Operations }

func (hungQueue) Stats(ctx context.Context) (durable.Stats, error) {
	<-ctx.Done()
	return durable.Stats{}, ctx.Err()
}

// TestRequestTimeoutBoundsAHungDatabase: a request whose database does not answer ends after
// Config.RequestTimeout with 503 saying so, logged as a warning, not as a server error.
func TestRequestTimeoutBoundsAHungDatabase(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zap.DebugLevel)
		h, err := admin.New(admin.Config{Queue: hungQueue{}, Sender: nopSender{}, Token: token, RequestTimeout: time.Second,
			Logger: zap.New(core)})
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		res := auth(t, h, "GET", "/api/queue", "")
		want(t, res, http.StatusServiceUnavailable)
		if took := time.Since(began); took != time.Second {
			t.Errorf("the request took %v; RequestTimeout is 1s", took)
		}
		if body := res.Body.String(); !strings.Contains(body, "longer than 1s") {
			t.Errorf("body %s does not say the request ran out of its time", body)
		}
		if n := logs.FilterLevelExact(zap.ErrorLevel).Len(); n != 0 || logs.FilterMessage("admin: request ran out of its time").Len() != 1 {
			t.Errorf("logs = %+v; want one warning and no error", logs.All())
		}
	})
	if _, err := admin.New(admin.Config{Queue: hungQueue{}, Sender: nopSender{}, Token: token, RequestTimeout: -1}); err == nil ||
		!strings.Contains(err.Error(), "RequestTimeout is negative") {
		t.Errorf("a negative RequestTimeout: %v", err)
	}
}

// TestClientGoneIsNotAServerError: a request whose client went away is no server failure: no
// error is logged.
func TestClientGoneIsNotAServerError(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	h, err := admin.New(admin.Config{Queue: hungQueue{}, Sender: nopSender{}, Token: token, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, "GET", "/api/queue", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if n := logs.FilterLevelExact(zap.ErrorLevel).Len(); n != 0 || logs.FilterMessage("admin: request ended by its client").Len() != 1 {
		t.Errorf("status %d, logs = %+v; want a debug entry and no error", w.Code, logs.All())
	}
}

// bigQueue is an admin.Operations whose queue holds many succeeded items and discarded
// letters: their counts were made 4.2 s and 1.5 s before Stats' answer.
type bigQueue struct{ admin.Operations }

func (bigQueue) Stats(context.Context) (durable.Stats, error) {
	return durable.Stats{
		Counts:         map[record.ItemState]int64{record.StatePending: 3, record.StateSucceeded: 1_234_567},
		CountAge:       map[record.ItemState]time.Duration{record.StateSucceeded: 4200 * time.Millisecond},
		DeadLetters:    map[record.DeadLetterStatus]int{record.DeadLetterFailed: 2, record.DeadLetterDiscarded: 20_000},
		LetterCountAge: map[record.DeadLetterStatus]time.Duration{record.DeadLetterDiscarded: 1500 * time.Millisecond},
	}, nil
}

// GET /api/queue says which counts were made before the answer, and how long before: a state
// with many items is counted in full every few seconds.
func TestQueueStatsSayHowOldALargeCountIs(t *testing.T) {
	h, err := admin.New(admin.Config{Queue: bigQueue{}, Sender: nopSender{}, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	res := auth(t, h, "GET", "/api/queue", "")
	want(t, res, http.StatusOK)
	var body struct {
		Items            map[string]int64 `json:"items"`
		CountAgeMS       map[string]int64 `json:"count_age_ms"`
		LetterCountAgeMS map[string]int64 `json:"letter_count_age_ms"`
	}
	if err := json.Unmarshal(res.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if body.Items["succeeded"] != 1_234_567 || len(body.CountAgeMS) != 1 || body.CountAgeMS["succeeded"] != 4200 ||
		len(body.LetterCountAgeMS) != 1 || body.LetterCountAgeMS["discarded"] != 1500 {
		t.Errorf("GET /api/queue = %s; want succeeded 1234567 with count_age_ms {succeeded: 4200} alone, letter_count_age_ms {discarded: 1500} alone", res.Body.String())
	}
	// The route takes no query: a parameter is refused, as by every route.
	want(t, auth(t, h, "GET", "/api/queue?state=dead", ""), http.StatusBadRequest)
}
