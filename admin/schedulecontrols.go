package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// ScheduleControls is what the routes that change schedules call of the configured queue; a
// *durable.Queue is one. It is apart from Operations so that a stand-in for Operations needs
// none of it: with a Config.Queue that is not a ScheduleControls, those routes answer 404,
// saying so, and the schedules are shown only.
type ScheduleControls interface {
	AddSchedule(ctx context.Context, spec durable.ScheduleSpec, actor string) (record.ScheduleInfo, error)
	RemoveSchedule(ctx context.Context, name, actor string) (record.ScheduleInfo, error)
	PauseSchedule(ctx context.Context, name, actor string, until time.Time) (record.ScheduleInfo, error)
	ResumeSchedule(ctx context.Context, name, actor string) (record.ScheduleInfo, error)
	RunScheduleNow(ctx context.Context, name, actor string) (record.ScheduleInfo, error)
}

var _ ScheduleControls = (*durable.Queue)(nil)

// scheduleControls runs h with the queue's ScheduleControls, or answers 404 when the queue
// has none.
func (s *server) scheduleControls(h func(w http.ResponseWriter, r *http.Request, principal string, c ScheduleControls)) handlerFunc {
	return s.needQueue(func(w http.ResponseWriter, r *http.Request, p string) {
		c, ok := s.cfg.Queue.(ScheduleControls)
		if !ok {
			writeError(w, http.StatusNotFound, "the configured queue does not support changing schedules (admin.ScheduleControls)")
			return
		}
		h(w, r, p, c)
	})
}

type addScheduleRequest struct {
	Name     string          `json:"name"`
	Spec     string          `json:"spec"`
	Location string          `json:"location"`
	Request  string          `json:"request"`
	Payload  json.RawMessage `json:"payload"`
}

func (s *server) addSchedule(w http.ResponseWriter, r *http.Request, principal string, c ScheduleControls) {
	var body addScheduleRequest
	if !decodeBody(w, r, &body) {
		return
	}
	if errs := badTexts(`field "name"`, body.Name, `field "spec"`, body.Spec, `field "location"`, body.Location, `field "request"`, body.Request); len(errs) > 0 {
		writeError(w, http.StatusBadRequest, joinAtMost(errs).Error())
		return
	}
	payload := []byte(body.Payload)
	if len(payload) == 0 || string(payload) == "null" {
		payload = []byte("{}") // a request of no fields
	}
	info, err := c.AddSchedule(r.Context(), durable.ScheduleSpec{Name: body.Name, Spec: body.Spec, Location: body.Location,
		Request: body.Request, Payload: payload}, principal)
	s.answerSchedule(w, r, http.StatusCreated, info, err)
}

type pauseScheduleRequest struct {
	// Until, when set, is when the pause ends by itself (RFC 3339).
	Until string `json:"until"`
}

func (s *server) pauseSchedule(w http.ResponseWriter, r *http.Request, principal string, c ScheduleControls) {
	var body pauseScheduleRequest
	if !decodeBody(w, r, &body) {
		return
	}
	var until time.Time
	if strings.TrimSpace(body.Until) != "" {
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(body.Until))
		if err != nil {
			writeError(w, http.StatusBadRequest, `field "until": `+quote(body.Until)+` is not an RFC 3339 time (2030-01-02T03:04:05Z)`)
			return
		}
		// A time given must be ahead: the zero time (0001-01-01) means "no end" to
		// PauseSchedule, where here only a missing field does.
		if !t.After(s.now()) {
			writeError(w, http.StatusBadRequest, `field "until" `+quote(body.Until)+` is not in the future: leave it out to pause until resumed`)
			return
		}
		until = t
	}
	info, err := c.PauseSchedule(r.Context(), r.PathValue("name"), principal, until)
	s.answerSchedule(w, r, http.StatusOK, info, err)
}

// scheduleAction is a route that calls act with the schedule's name alone (remove, resume,
// run now), answering status when it succeeds.
func (s *server) scheduleAction(status int, act func(c ScheduleControls, ctx context.Context, name, actor string) (record.ScheduleInfo, error)) handlerFunc {
	return s.scheduleControls(func(w http.ResponseWriter, r *http.Request, principal string, c ScheduleControls) {
		if !decodeBody(w, r, &struct{}{}) {
			return
		}
		info, err := act(c, r.Context(), r.PathValue("name"), principal)
		s.answerSchedule(w, r, status, info, err)
	})
}

// answerSchedule answers a change of a schedule: status with the schedule as it is after it;
// 400 for a refused input (the message names the field), 404 for an unknown schedule, 409 for
// a change only the code can make or a name taken, 503 when the request ended first, 500 when
// the store failed.
func (s *server) answerSchedule(w http.ResponseWriter, r *http.Request, status int, info record.ScheduleInfo, err error) {
	switch {
	case err == nil:
		writeJSON(w, status, struct {
			Schedule scheduleBody `json:"schedule"`
		}{newScheduleBody(info)})
	case errors.Is(err, durable.ErrInvalidSchedule):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, durable.ErrNotFound):
		writeError(w, http.StatusNotFound, "unknown schedule "+quote(r.PathValue("name")))
	case errors.Is(err, durable.ErrScheduleInCode), errors.Is(err, durable.ErrScheduleExists):
		writeError(w, http.StatusConflict, err.Error())
	default:
		s.failed(w, r, err, leftBeforeChange)
	}
}
