package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// Operations is what the queue routes call of a durable queue; a *durable.Queue is one. The
// handler depends on these methods alone, so a test or another store can stand in for it.
type Operations interface {
	DeadLetters(ctx context.Context, f durable.DeadLetterFilter) (durable.DeadLetterPage, error)
	DeadLetter(ctx context.Context, id record.DeadLetterID) (record.DeadLetter, []record.TimelineEntry, error)
	Replay(ctx context.Context, sender mediator.Sender, id record.DeadLetterID, actor string) (durable.Resolution, error)
	ReplayMany(ctx context.Context, sender mediator.Sender, ids []record.DeadLetterID, actor string) ([]durable.BulkResult, error)
	Discard(ctx context.Context, id record.DeadLetterID, actor, reason string) (durable.Resolution, error)
	DiscardMany(ctx context.Context, ids []record.DeadLetterID, actor, reason string) ([]durable.BulkResult, error)
	Schedules(ctx context.Context) ([]record.ScheduleInfo, error)
	ScheduleRuns(ctx context.Context, name string, limit int) ([]record.ScheduleRun, error)
	Stats(ctx context.Context) (durable.Stats, error)
}

// Breakers is what the breaker routes call of a breaker registry; a *breaker.Registry is one.
type Breakers interface {
	Snapshot() []breaker.Snapshot
	Get(key string) (breaker.Snapshot, error)
	Trip(key string) error
	Reset(key string) error
}

var (
	_ Operations = (*durable.Queue)(nil)
	_ Breakers   = (*breaker.Registry)(nil)
)

// Config configures the admin handler. Breakers or Queue (or both) say what it shows; an
// Authorizer, a Token or Tokens say who may use it, and with which Role. Every other zero
// field means its default.
type Config struct {
	// Breakers is the registry (a *breaker.Registry) whose breakers the breaker routes list,
	// trip and reset. nil: the breaker routes answer 404, saying no registry is configured.
	Breakers Breakers
	// BreakerRegistries are a service's other breaker registries (one keyed by host beside
	// one keyed by request type, say), each listed under its name beside Config.Breakers's
	// (named DefaultName). A route that names a breaker finds it in the registry the query
	// parameter registry names, or in the only registry that knows its key.
	BreakerRegistries map[string]Breakers
	// Hedges is the hedging behavior (a *hedge.Behavior) whose keys GET /api/hedges lists and
	// the dashboard's hedging panel shows. nil: the route answers 404.
	Hedges Hedges
	// HedgeBehaviors are a service's other hedging behaviors, listed under their names beside
	// Config.Hedges's (named DefaultName).
	HedgeBehaviors map[string]Hedges
	// RateLimits is the rate limiter (a *ratelimit.Behavior) whose limits GET /api/rate-limits
	// lists: per key, its rate and burst (its own, or the limiter's default), the permits free
	// now, the calls waiting and refused, and for a fleet's limit whether the instance keeps to
	// its share. nil: the route answers 404.
	RateLimits RateLimits
	// RateLimiters are a service's other rate limiters (one per provider, say), listed under
	// their names beside Config.RateLimits's (named DefaultName).
	RateLimiters map[string]RateLimits
	// Queue is the durable queue (a *durable.Queue) whose dead letters, schedules and counts
	// the other routes show. nil: those routes answer 404, saying no queue is configured.
	Queue Operations
	// Budgets is the retry budget (a *budget.Budget) whose keys GET /api/retry-budgets lists
	// with their calls, retries and refused retries over the window. nil: the route answers
	// 404, saying no retry budget is configured.
	Budgets Budgets
	// RetryBudgets are a service's other retry budgets, listed under their names beside
	// Config.Budgets's (named DefaultName).
	RetryBudgets map[string]Budgets
	// Sender replays dead letters: the built mediator. Required with Queue, since a replay
	// runs the request again through it.
	Sender mediator.Sender
	// Authorizer names the principal of a request and their role, or refuses it. nil: the
	// default authorizer, which accepts the bearer tokens of Token and Tokens, each checked in
	// constant time. New refuses to build with none of the three, so that an admin surface is
	// never open by mistake.
	Authorizer Authorizer
	// Token is a bearer token of the default Authorizer whose principal is "admin", with
	// RoleAdmin: the one secret a small deployment needs. Ignored when Authorizer is set. Use a
	// long random value (32 bytes or more) from the application's secrets. A token with
	// leading or trailing white space is refused: no request could send it.
	Token string
	// Tokens are more bearer tokens of the default Authorizer, each with its principal's name
	// and role: a viewer's token for a monitoring script, an operator's for a CLI. New
	// refuses an empty token or name, one with leading or trailing white space, a token or a
	// name given twice (Token's name is "admin"), an unknown role, and Tokens with an
	// Authorizer (which would ignore them).
	Tokens []BearerToken
	// SecureCookies marks the dashboard's session cookie Secure on every request. Default
	// false: it is marked Secure when the request came over TLS, which the handler cannot see
	// behind a proxy that terminates TLS; set it there.
	SecureCookies bool
	// Metrics, when set, is served at GET /metrics behind the same authorization, for
	// example metrics.Recorder.Handler(). nil: /metrics answers 404.
	Metrics http.Handler
	// MaxBodyBytes limits a request body; a longer one is refused with 413. Default 64 KiB:
	// the largest body, a bulk request of 100 ids with a reason, is a few KiB.
	MaxBodyBytes int64
	// SessionTTL is how long a dashboard session lasts after the token exchange, whatever its
	// use. Default 12 hours: a working shift, after which the operator gives the token again.
	SessionTTL time.Duration
	// RequestTimeout bounds the work of one API request: a database that does not answer
	// makes the request end with 503 after it, saying so, instead of holding the dashboard (and
	// a connection) until the database comes back. Default 30 seconds: longer than a replay's
	// handler normally runs, since a replay runs it within the request, and short enough that
	// an operator sees the outage.
	RequestTimeout time.Duration
	// Logger receives the errors a client cannot fix (the database failed), which the client
	// sees as a 500 without details. nil: zap.L(), the process's global logger, as in every
	// package of the module, so that one zap.ReplaceGlobals configures them all.
	Logger *zap.Logger
	// Clock is the time source of sessions. nil: behaviors.SystemClock.
	Clock behaviors.Clock
}

// Validate reports every problem of c, joined, each naming its field.
func (c Config) Validate() error {
	var errs []error
	errs = append(errs, c.validateTokens()...)
	for _, f := range []struct {
		name string
		v    any
	}{{"Queue", c.Queue}, {"Breakers", c.Breakers}, {"Sender", c.Sender}, {"Authorizer", c.Authorizer}, {"Budgets", c.Budgets}, {"Hedges", c.Hedges}, {"RateLimits", c.RateLimits}} {
		if nilValue(f.v) {
			// A nil pointer in the interface is not a missing field: the first request that
			// used it would panic.
			errs = append(errs, fmt.Errorf("admin: Config.%s is a nil %T: leave it unset, or pass a value", f.name, f.v))
		}
	}
	errs = append(errs, validateNamed("BreakerRegistries", c.BreakerRegistries)...)
	errs = append(errs, validateNamed("HedgeBehaviors", c.HedgeBehaviors)...)
	errs = append(errs, validateNamed("RateLimiters", c.RateLimiters)...)
	errs = append(errs, validateNamed("RetryBudgets", c.RetryBudgets)...)
	if c.Breakers == nil && c.Queue == nil && c.Budgets == nil && len(c.BreakerRegistries) == 0 && len(c.RetryBudgets) == 0 {
		errs = append(errs, errors.New("admin: Config.Breakers, Config.Queue or Config.Budgets is required: there is nothing to administer"))
	}
	if c.Queue != nil && c.Sender == nil {
		errs = append(errs, errors.New("admin: Config.Sender is required with Config.Queue: replays run through it"))
	}
	if c.MaxBodyBytes < 0 {
		errs = append(errs, errors.New("admin: Config.MaxBodyBytes is negative"))
	}
	if c.RequestTimeout < 0 {
		errs = append(errs, errors.New("admin: Config.RequestTimeout is negative"))
	}
	if c.SessionTTL < 0 {
		errs = append(errs, errors.New("admin: Config.SessionTTL is negative"))
	}
	return errors.Join(errs...)
}

// nilValue reports whether v holds a nil pointer: set, but to nothing (every implementation
// of the fields' interfaces in this module is a pointer).
func nilValue(v any) bool {
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}

// Authorizer decides who a request comes from. Authorize returns the principal: their name,
// recorded as the actor of the changes they make, and their role, which each route checks
// (a role too low for the route is answered with 403 naming both). Or it returns an error:
// ErrForbidden (or an error wrapping it) for a known principal who may not use the admin at
// all, which is answered with 403; any other error is answered with 401 and a
// WWW-Authenticate challenge. The error's text is the answer's message ("forbidden: bob is
// not an operator"), so say there what the client should know and nothing it should not.
//
// An Authorizer that reads a cookie of the application (single sign-on) needs no session of
// this package; CrossOriginProtection still refuses cross-origin requests that change state.
type Authorizer interface {
	Authorize(r *http.Request) (Principal, error)
}

// AuthorizerFunc is an Authorizer as a function.
type AuthorizerFunc func(r *http.Request) (Principal, error)

// Authorize calls f.
func (f AuthorizerFunc) Authorize(r *http.Request) (Principal, error) { return f(r) }

var (
	// ErrUnauthorized reports a request without valid credentials (answered with 401).
	ErrUnauthorized = errors.New("admin: unauthorized")
	// ErrForbidden reports a principal who may not use the admin surface (answered with 403).
	ErrForbidden = errors.New("admin: forbidden")
)
