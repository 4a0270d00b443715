package admin

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/switchboard-go/switchboard/durable/record"
)

type scheduleBody struct {
	Name          string         `json:"name"`
	Spec          string         `json:"spec"`
	Location      string         `json:"location"`
	NextRun       *time.Time     `json:"next_run"`
	RunningOn     string         `json:"running_on"`
	LastStartedAt *time.Time     `json:"last_started_at"`
	LastEndedAt   *time.Time     `json:"last_ended_at"`
	LastOutcome   record.Outcome `json:"last_outcome"`
	LastError     string         `json:"last_error"`
	// DeclaredInCode: the schedule's request is built by code (durable.Schedule), not
	// Request and Payload; the code alone removes it.
	DeclaredInCode bool            `json:"declared_in_code"`
	Request        string          `json:"request,omitempty"`
	Payload        json.RawMessage `json:"payload,omitempty"` // when it is JSON (the default codec's)
	Paused         bool            `json:"paused"`
	PausedAt       *time.Time      `json:"paused_at"`
	PausedUntil    *time.Time      `json:"paused_until"`
	PausedBy       string          `json:"paused_by,omitempty"`
	RemovedAt      *time.Time      `json:"removed_at"`
	RemovedBy      string          `json:"removed_by,omitempty"`
	RunNowAt       *time.Time      `json:"run_now_at"`
	RunNowBy       string          `json:"run_now_by,omitempty"`
}

func newScheduleBody(i record.ScheduleInfo) scheduleBody {
	b := scheduleBody{Name: i.Name, Spec: i.Spec, Location: i.Location,
		NextRun: timeOrNil(i.NextRun), RunningOn: i.RunningOn,
		LastStartedAt: timeOrNil(i.LastStartedAt), LastEndedAt: timeOrNil(i.LastEndedAt),
		LastOutcome: i.LastOutcome, LastError: i.LastError,
		DeclaredInCode: i.Request == "", Request: i.Request, Paused: i.Paused, PausedAt: timeOrNil(i.PausedAt),
		PausedUntil: timeOrNil(i.PausedUntil), PausedBy: i.PausedBy, RemovedAt: timeOrNil(i.RemovedAt), RemovedBy: i.RemovedBy,
		RunNowAt: timeOrNil(i.RunNowAt), RunNowBy: i.RunNowBy}
	if json.Valid(i.Payload) {
		b.Payload = i.Payload
	}
	return b
}

type runBody struct {
	ID        int64          `json:"id"`
	Instance  string         `json:"instance"`
	DueAt     *time.Time     `json:"due_at"`
	StartedAt *time.Time     `json:"started_at"`
	EndedAt   *time.Time     `json:"ended_at"`
	Outcome   record.Outcome `json:"outcome"`
	Error     string         `json:"error"`
	RunNowBy  string         `json:"run_now_by,omitempty"` // the operator whose run-now it was
}

func (s *server) listSchedules(w http.ResponseWriter, r *http.Request, _ string) {
	if _, ok := query(w, r); !ok {
		return
	}
	infos, err := s.cfg.Queue.Schedules(r.Context())
	if err != nil {
		s.internal(w, r, err)
		return
	}
	out := make([]scheduleBody, 0, len(infos))
	for _, i := range infos {
		out = append(out, newScheduleBody(i))
	}
	writeJSON(w, http.StatusOK, struct {
		Schedules []scheduleBody `json:"schedules"`
	}{out})
}

// scheduleNamed is h for a route of one schedule: a {name} that no schedule can have (not
// valid UTF-8, a NUL byte, over maxText bytes) is answered 400 before h runs, since the
// database would refuse it in a lookup.
func scheduleNamed(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, principal string) {
		if err := badText("schedule name", r.PathValue("name")); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		h(w, r, principal)
	}
}

func (s *server) scheduleRuns(w http.ResponseWriter, r *http.Request, _ string) {
	q, ok := query(w, r, "limit")
	if !ok {
		return
	}
	limit, err := intParam(q, "limit", 1, 1000)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	name := r.PathValue("name")
	infos, err := s.cfg.Queue.Schedules(r.Context())
	if err != nil {
		s.internal(w, r, err)
		return
	}
	known := false
	for _, i := range infos {
		known = known || i.Name == name
	}
	if !known {
		writeError(w, http.StatusNotFound, "unknown schedule "+quote(name))
		return
	}
	runs, err := s.cfg.Queue.ScheduleRuns(r.Context(), name, limit)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	out := make([]runBody, 0, len(runs))
	for _, run := range runs {
		out = append(out, runBody{ID: run.ID, Instance: run.Instance, DueAt: timeOrNil(run.DueAt),
			StartedAt: timeOrNil(run.StartedAt), EndedAt: timeOrNil(run.EndedAt),
			Outcome: run.Outcome, Error: run.Error, RunNowBy: run.RunNowBy})
	}
	writeJSON(w, http.StatusOK, struct {
		Runs []runBody `json:"runs"`
	}{out})
}

func (s *server) queueStats(w http.ResponseWriter, r *http.Request, _ string) {
	if _, ok := query(w, r); !ok {
		return
	}
	st, err := s.cfg.Queue.Stats(r.Context())
	if err != nil {
		s.internal(w, r, err)
		return
	}
	type items struct {
		Pending   int64 `json:"pending"`
		Running   int64 `json:"running"`
		Succeeded int64 `json:"succeeded"`
		Dead      int64 `json:"dead"`
		Cancelled int64 `json:"cancelled"`
	}
	ages := make(map[record.ItemState]int64, len(st.CountAge))
	for state, age := range st.CountAge {
		ages[state] = age.Milliseconds()
	}
	letterAges := make(map[record.DeadLetterStatus]int64, len(st.LetterCountAge))
	for status, age := range st.LetterCountAge {
		letterAges[status] = age.Milliseconds()
	}
	type letters struct {
		Failed    int `json:"failed"`
		Replayed  int `json:"replayed"`
		Discarded int `json:"discarded"`
	}
	writeJSON(w, http.StatusOK, struct {
		Items       items   `json:"items"`
		DeadLetters letters `json:"dead_letters"`
		// OldestDueMS is how long the oldest due item has waited (0 for none): a backlog
		// the workers do not keep up with shows here first.
		OldestDueMS int64 `json:"oldest_due_ms"`
		// CountAgeMS names the states whose counts were made before this answer (those with
		// more than durable.ExactCountLimit items, counted in full every few seconds) and how
		// long before, in milliseconds; a state absent from it was counted for this answer.
		CountAgeMS map[record.ItemState]int64 `json:"count_age_ms"`
		// LetterCountAgeMS is CountAgeMS for the dead letters' statuses.
		LetterCountAgeMS map[record.DeadLetterStatus]int64 `json:"letter_count_age_ms"`
	}{
		items{st.Counts[record.StatePending], st.Counts[record.StateRunning], st.Counts[record.StateSucceeded], st.Counts[record.StateDead], st.Counts[record.StateCancelled]},
		letters{st.DeadLetters[record.DeadLetterFailed], st.DeadLetters[record.DeadLetterReplayed], st.DeadLetters[record.DeadLetterDiscarded]},
		st.OldestDue.Milliseconds(),
		ages,
		letterAges,
	})
}
