package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// History is what the history route calls of the queue; a *durable.Queue is one. The route
// answers 404 when Config.Queue is not one.
type History interface {
	History(ctx context.Context, since time.Time) ([]durable.HistoryMinute, error)
}

var _ History = (*durable.Queue)(nil)

const noHistory = "the configured queue keeps no history (it is not an admin.History, such as a *durable.Queue)"

// historyRange is how far back GET /api/history goes by default: the dashboard's longest
// range. historyLimit is how far back it may be asked to go: the default history retention
// (durable.DefaultHistoryRetention), past which there is nothing to read.
const (
	historyRange = 24 * time.Hour
	historyLimit = durable.DefaultHistoryRetention
)

type historyItems struct {
	Pending   int64 `json:"pending"`
	Running   int64 `json:"running"`
	Succeeded int64 `json:"succeeded"`
	Dead      int64 `json:"dead"`
	Cancelled int64 `json:"cancelled"`
}

type historyLetters struct {
	Failed    int `json:"failed"`
	Replayed  int `json:"replayed"`
	Discarded int `json:"discarded"`
}

type historyMinuteBody struct {
	Minute    time.Time        `json:"minute"`
	Instances int              `json:"instances"`
	Outcomes  map[string]int64 `json:"outcomes"`
	// Items and DeadLetters are null for a minute no instance sampled.
	Items           *historyItems            `json:"items"`
	DeadLetters     *historyLetters          `json:"dead_letters"`
	Breakers        map[string]breaker.State `json:"breakers"`
	BreakersOmitted int                      `json:"breakers_omitted"`
}

// getHistory answers GET /api/history: the queue's minutes from since (RFC 3339; default 24 h
// ago, at most historyLimit ago), merged over the instances, oldest first.
func (s *server) getHistory(w http.ResponseWriter, r *http.Request, _ string, q History) {
	v, ok := query(w, r, "since")
	if !ok {
		return
	}
	now := s.now()
	since := now.Add(-historyRange)
	if raw := v.Get("since"); raw != "" {
		at, err := time.Parse(time.RFC3339Nano, raw)
		switch {
		case err != nil:
			writeError(w, http.StatusBadRequest, fmt.Sprintf("since %s: want an RFC 3339 time such as 2026-01-02T15:04:05Z", quote(raw)))
			return
		case at.Before(now.Add(-historyLimit)):
			writeError(w, http.StatusBadRequest, fmt.Sprintf("since %s is more than %v ago: the history keeps no more by default", at.UTC().Format(time.RFC3339), historyLimit))
			return
		case at.After(now):
			writeError(w, http.StatusBadRequest, fmt.Sprintf("since %s is in the future", at.UTC().Format(time.RFC3339)))
			return
		}
		since = at
	}
	minutes, err := q.History(r.Context(), since)
	if errors.Is(err, durable.ErrNoHistory) {
		writeError(w, http.StatusNotFound, "the configured queue keeps no history: "+err.Error())
		return
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	out := make([]historyMinuteBody, 0, len(minutes))
	for _, m := range minutes {
		b := historyMinuteBody{Minute: m.Minute.UTC(), Instances: m.Instances, Outcomes: map[string]int64{}, Breakers: map[string]breaker.State{},
			BreakersOmitted: m.BreakersOmitted}
		for k, n := range m.Outcomes {
			b.Outcomes[k] = n
		}
		for k, st := range m.Breakers {
			b.Breakers[k] = st
		}
		if m.Items != nil {
			b.Items = &historyItems{m.Items[record.StatePending], m.Items[record.StateRunning], m.Items[record.StateSucceeded],
				m.Items[record.StateDead], m.Items[record.StateCancelled]}
		}
		if m.DeadLetters != nil {
			b.DeadLetters = &historyLetters{m.DeadLetters[record.DeadLetterFailed], m.DeadLetters[record.DeadLetterReplayed],
				m.DeadLetters[record.DeadLetterDiscarded]}
		}
		out = append(out, b)
	}
	writeJSON(w, http.StatusOK, struct {
		Since   time.Time           `json:"since"`
		Now     time.Time           `json:"now"`
		Minutes []historyMinuteBody `json:"minutes"`
	}{since.UTC(), now.UTC(), out})
}
