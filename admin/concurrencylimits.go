package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// ConcurrencyLimits is what the concurrency limit routes call of the queue; a *durable.Queue is
// one. The routes answer 404 when Config.Queue is not one.
type ConcurrencyLimits interface {
	SetConcurrencyLimit(ctx context.Context, key string, n int, actor string, opts ...durable.ConcurrencyLimitOption) (record.ConcurrencyLimit, error)
	RemoveConcurrencyLimit(ctx context.Context, key, actor string) (bool, error)
	ConcurrencyLimits(ctx context.Context) ([]record.ConcurrencyLimit, error)
}

var _ ConcurrencyLimits = (*durable.Queue)(nil)

const noConcurrencyLimits = "the configured queue does not support concurrency limits (it is not an admin.ConcurrencyLimits, such as a *durable.Queue)"

// maxConcurrencyLimit is the largest limit durable.Queue.SetConcurrencyLimit takes.
const maxConcurrencyLimit = 1_000_000

type concurrencyLimitBody struct {
	Key       string    `json:"key"`
	Max       int       `json:"max"`
	InUse     int       `json:"in_use"`
	Actor     string    `json:"actor"`
	Reason    string    `json:"reason"`
	CreatedAt time.Time `json:"created_at"`
}

func concurrencyLimitOf(l record.ConcurrencyLimit) concurrencyLimitBody {
	return concurrencyLimitBody{Key: l.Key, Max: l.Max, InUse: l.InUse, Actor: l.Actor, Reason: l.Reason, CreatedAt: l.CreatedAt.UTC()}
}

func (s *server) listConcurrencyLimits(w http.ResponseWriter, r *http.Request, _ string, q ConcurrencyLimits) {
	if _, ok := query(w, r); !ok {
		return
	}
	ls, err := q.ConcurrencyLimits(r.Context())
	if err != nil {
		s.failed(w, r, err, leftBeforeRead)
		return
	}
	out := make([]concurrencyLimitBody, 0, len(ls))
	for _, l := range ls {
		out = append(out, concurrencyLimitOf(l))
	}
	writeJSON(w, http.StatusOK, struct {
		Limits []concurrencyLimitBody `json:"limits"`
	}{out})
}

// limitKeyOf checks the key of a limit route, naming what is wrong.
func limitKeyOf(r *http.Request) (string, []error) {
	key := r.PathValue("key")
	switch {
	case strings.TrimSpace(key) == "":
		return key, []error{errors.New("the key is empty: the path names a breaker key")}
	case len(key) > maxPauseTarget:
		return key, []error{fmt.Errorf("the key is %d bytes, more than %d: no breaker key is that long", len(key), maxPauseTarget)}
	case !utf8.ValidString(key):
		return key, []error{fmt.Errorf("the breaker key %q is not valid UTF-8", key)}
	case strings.IndexByte(key, 0) >= 0:
		return key, []error{fmt.Errorf("the breaker key %q holds a NUL byte", key)}
	}
	return key, nil
}

func (s *server) setConcurrencyLimit(w http.ResponseWriter, r *http.Request, principal string, q ConcurrencyLimits) {
	var body struct {
		Max    *int   `json:"max"`
		Reason string `json:"reason"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	key, errs := limitKeyOf(r)
	switch {
	case body.Max == nil:
		errs = append(errs, errors.New(`field "max" is required: how many items of the key may run at once`))
	case *body.Max < 1 || *body.Max > maxConcurrencyLimit:
		errs = append(errs, fmt.Errorf(`field "max" %d is outside [1, %d]: a limit lets at least one item run (pause the key to hold them all back)`, *body.Max, maxConcurrencyLimit))
	}
	if len(body.Reason) > maxReason {
		errs = append(errs, fmt.Errorf(`field "reason" is %d bytes, more than %d: say why in a few sentences`, len(body.Reason), maxReason))
	}
	if len(errs) > 0 {
		writeError(w, http.StatusBadRequest, joinAtMost(errs).Error()+"; no limit was set")
		return
	}
	l, err := q.SetConcurrencyLimit(r.Context(), key, *body.Max, principal, durable.LimitReason(body.Reason))
	if err != nil {
		s.failed(w, r, err, leftBeforeChange)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Limit concurrencyLimitBody `json:"limit"`
	}{concurrencyLimitOf(l)})
}

func (s *server) removeConcurrencyLimit(w http.ResponseWriter, r *http.Request, principal string, q ConcurrencyLimits) {
	key, errs := limitKeyOf(r)
	if len(errs) > 0 {
		writeError(w, http.StatusBadRequest, joinAtMost(errs).Error()+"; nothing was removed")
		return
	}
	removed, err := q.RemoveConcurrencyLimit(r.Context(), key, principal)
	if err != nil {
		s.failed(w, r, err, leftBeforeChange)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Removed bool `json:"removed"`
	}{removed})
}
