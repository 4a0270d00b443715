package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable/record"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The dispatcher on SQLite with short durations: the healthy and the bursty subscribers get
// every event; the down host gets its breaker's threshold of requests (and the scheduler's
// workers, had they raced the breaker), then one probe per open period, however many events
// are for it; none of its items is lost: each is a dead letter once its deadline passed.
func TestRun(t *testing.T) {
	const events = 10
	opt := options{addr: "127.0.0.1:0", events: events, openFor: 250 * time.Millisecond, maxAge: 2 * time.Second}
	var breakers []struct {
		Key   string        `json:"key"`
		State breaker.State `json:"state"`
	}
	var letters struct {
		Total int `json:"total"`
	}
	opt.inspect = func(adminURL, token string) {
		get(t, adminURL+"api/breakers", token, &struct {
			Breakers any `json:"breakers"`
		}{&breakers})
		get(t, adminURL+"api/dead-letters", token, &letters)
	}
	var out strings.Builder
	sum, err := run(context.Background(), &out, filepath.Join(t.TempDir(), "queue.db"), opt)
	if err != nil {
		t.Fatal(err)
	}
	text := out.String()
	t.Log("\n" + text)

	if got := sum.answers[http.StatusNoContent] + sum.answers[http.StatusAccepted]; got != 3*events {
		t.Errorf("%d events delivered or deferred at once, want %d: answers %v", got, 3*events, sum.answers)
	}
	if sum.answers[http.StatusUnprocessableEntity] != 1 {
		t.Errorf("the invalid event was not answered 422: answers %v", sum.answers)
	}
	for _, name := range []string{"healthy", "bursty"} {
		if sum.delivered[name] != events || sum.dead[name] != 0 {
			t.Errorf("%s: %d of %d delivered, %d dead letters", name, sum.delivered[name], events, sum.dead[name])
		}
	}
	if len(sum.items["bursty"]) == 0 || sum.attempts["bursty"] == 0 {
		t.Errorf("bursty: no event deferred and retried by the scheduler (%d deferred, %d attempts)", len(sum.items["bursty"]), sum.attempts["bursty"])
	}

	// The down host: every event for it was stored and ended as a dead letter, none delivered.
	if sum.delivered["down"] != 0 || len(sum.items["down"]) != events || sum.dead["down"] != events {
		t.Errorf("down: %d delivered, %d of %d stored, %d dead letters", sum.delivered["down"], len(sum.items["down"]), events, sum.dead["down"])
	}
	if !strings.Contains(sum.lastError["down"], "deadline passed") {
		t.Errorf("down: a dead letter's error does not name its deadline: %q", sum.lastError["down"])
	}
	periods := int(sum.took/opt.openFor) + 1
	if bound := failureThreshold + workers + periods; sum.hits["down"] > bound {
		t.Errorf("down: %d requests reached it in %v, want at most %d (threshold %d + workers %d + %d open periods)",
			sum.hits["down"], sum.took, bound, failureThreshold, workers, periods)
	}
	// Its items' attempts are the scheduler's requests that reached it: a refusal is no attempt.
	if sum.attempts["down"] > sum.hits["down"]-failureThreshold {
		t.Errorf("down: %d attempts charged, but only %d requests beyond the inbound ones reached it", sum.attempts["down"], sum.hits["down"]-failureThreshold)
	}
	if sum.parked < events-workers {
		t.Errorf("down: at most %d items parked on its breaker at once, want at least %d", sum.parked, events-workers)
	}
	if sum.downBreaker == breaker.StateClosed {
		t.Errorf("down: its breaker closed")
	}
	if sum.outcomes[record.SettledExpired] != events {
		t.Errorf("the scheduler's outcomes %v, want %d expired", sum.outcomes, events)
	}

	// The admin shows the host breakers and the dead letters.
	downShown := false
	for _, b := range breakers {
		downShown = downShown || strings.Contains(b.Key, "127.0.0.1") && b.State != breaker.StateClosed
	}
	if !downShown || letters.Total != events {
		t.Errorf("the admin shows breakers %+v and %d dead letters", breakers, letters.Total)
	}
	for _, want := range []string{"10 of 10 delivered", " 0 of 10 delivered", "10 dead letters", "charged no attempt", "1 invalid (422)"} {
		if !strings.Contains(text, want) {
			t.Errorf("the summary lacks %q", want)
		}
	}
}

// get decodes the JSON answer of the admin API at url into v.
func get(t *testing.T, url, token string, v any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
