package admin_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
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
