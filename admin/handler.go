package admin

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
)

//go:embed ui
var uiFiles embed.FS

const (
	defaultMaxBody        = 64 << 10
	defaultRequestTimeout = 30 * time.Second
)

type server struct {
	cfg      Config
	auth     Authorizer
	sessions *sessions
	log      *zap.Logger
	now      func() time.Time
	mux      *http.ServeMux
	needs    map[string]routeNeed // route pattern → the role it needs
}

// New returns the admin handler of cfg, to mount under any prefix with http.StripPrefix:
//
//	h, err := admin.New(admin.Config{Breakers: reg, Queue: q, Sender: m, Token: token})
//	http.Handle("/admin/", http.StripPrefix("/admin", h))
//
// It refuses a cfg that Validate refuses: in particular one with neither an Authorizer nor a
// Token. The handler keeps dashboard sessions in memory and starts no goroutine.
func New(cfg Config) (http.Handler, error) {
	s, err := newServer(cfg)
	if err != nil {
		return nil, err
	}
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, "cross-origin request refused: state-changing requests must come from the dashboard's own origin")
	}))
	return cop.Handler(s), nil
}

// newServer is the handler of New without its cross-origin protection.
func newServer(cfg Config) (*server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = defaultMaxBody
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = defaultRequestTimeout
	}
	s := &server{cfg: cfg, auth: cfg.Authorizer, log: cfg.Logger, now: time.Now, mux: http.NewServeMux(), needs: map[string]routeNeed{}}
	if s.auth == nil {
		s.auth = newTokenAuthorizer(cfg)
	}
	if s.log == nil {
		s.log = zap.L()
	}
	if cfg.Clock != nil {
		s.now = cfg.Clock.Now
	}
	s.sessions = newSessions(s.now, cfg.SessionTTL)
	s.routes()
	return s, nil
}

func (s *server) routes() {
	ui, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the embedded directory is part of the package
	}
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, ui, "index.html")
	})
	assets := http.StripPrefix("/assets/", http.FileServerFS(mustSub(ui, "assets")))
	s.mux.Handle("GET /assets/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		notFound := "no dashboard asset " + r.URL.Path
		if strings.HasSuffix(r.URL.Path, "/") {
			// The directory is not listed: the page names the files it loads.
			writeError(w, http.StatusNotFound, notFound)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		// The file server's plain-text 404 becomes a JSON error like every other answer.
		assets.ServeHTTP(&muxError{ResponseWriter: w, r: r, notFound: notFound}, r)
	}))

	s.needs["GET /api/session"] = needs(RoleViewer, "reading the session")
	s.mux.Handle("GET /api/session", s.authorized(s.getSession))
	s.mux.HandleFunc("POST /api/session", s.postSession) // authorized by the Authorizer only, any role
	s.needs["POST /api/session"] = needs(RoleViewer, "starting a session")
	s.api("DELETE /api/session", s.deleteSession, needs(RoleViewer, "ending a session"))

	s.api("GET /api/breakers", s.needBreakers(s.listBreakers))
	s.api("GET /api/breakers/{key}", s.needBreakers(s.getBreaker))
	s.api("POST /api/breakers/{key}/trip", s.needBreakers(s.tripBreaker), needs(RoleOperator, "tripping a breaker"))
	s.api("POST /api/breakers/{key}/reset", s.needBreakers(s.resetBreaker), needs(RoleOperator, "resetting a breaker"))

	s.api("GET /api/hedges", s.listHedges)

	s.api("GET /api/dead-letters", s.needQueue(s.listDeadLetters))
	s.api("GET /api/dead-letters/{id}", s.needQueue(s.getDeadLetter))
	s.api("POST /api/dead-letters/{id}/replay", s.needQueue(s.replayDeadLetter), needs(RoleOperator, "replaying a dead letter"))
	s.api("POST /api/dead-letters/{id}/discard", s.needQueue(s.discardDeadLetter), needs(RoleOperator, "discarding a dead letter"))
	s.api("POST /api/dead-letters/replay", s.needQueue(s.replayDeadLetters), needs(RoleOperator, "replaying dead letters"))
	s.api("POST /api/dead-letters/discard", s.needQueue(s.discardDeadLetters), needs(RoleOperator, "discarding dead letters"))
	s.api("POST /api/dead-letters/actions", s.startBulkAction, needs(RoleOperator, "starting a bulk action"))
	s.api("GET /api/dead-letters/actions", s.listBulkActions)
	s.api("GET /api/dead-letters/actions/{id}", s.getBulkAction)
	s.api("POST /api/dead-letters/actions/{id}/cancel", s.cancelBulkAction, needs(RoleOperator, "cancelling a bulk action"))
	s.api("POST /api/breakers/{key}/reset-and-replay", s.needBreakers(s.resetAndReplay), needs(RoleOperator, "resetting a breaker and replaying its letters"))

	s.api("GET /api/schedules", s.needQueue(s.listSchedules))
	s.api("GET /api/schedules/{name}/runs", scheduleNamed(s.needQueue(s.scheduleRuns)))
	s.api("POST /api/schedules", s.scheduleControls(s.addSchedule), needs(RoleAdmin, "adding a schedule"))
	s.api("DELETE /api/schedules/{name}", scheduleNamed(s.scheduleAction(http.StatusOK, ScheduleControls.RemoveSchedule)), needs(RoleAdmin, "removing a schedule"))
	s.api("POST /api/schedules/{name}/pause", scheduleNamed(s.scheduleControls(s.pauseSchedule)), needs(RoleOperator, "pausing a schedule"))
	s.api("POST /api/schedules/{name}/resume", scheduleNamed(s.scheduleAction(http.StatusOK, ScheduleControls.ResumeSchedule)), needs(RoleOperator, "resuming a schedule"))
	s.api("POST /api/schedules/{name}/run-now", scheduleNamed(s.scheduleAction(http.StatusAccepted, ScheduleControls.RunScheduleNow)), needs(RoleOperator, "running a schedule now"))
	s.api("GET /api/queue", s.needQueue(s.queueStats))
	s.api("GET /api/history", needQueueOf(s, noHistory, s.getHistory))

	s.api("GET /api/pauses", needQueueOf(s, noPauses, s.listPauses))
	s.api("POST /api/pauses", needQueueOf(s, noPauses, s.createPause), needs(RoleOperator, "pausing work"))
	s.api("POST /api/pauses/resume", needQueueOf(s, noPauses, s.resumePause), needs(RoleOperator, "resuming paused work"))
	s.api("GET /api/audit", needQueueOf(s, noAuditLog, s.listAudit))
	s.api("GET /api/concurrency-limits", needQueueOf(s, noConcurrencyLimits, s.listConcurrencyLimits))
	s.api("PUT /api/concurrency-limits/{key}", needQueueOf(s, noConcurrencyLimits, s.setConcurrencyLimit), needs(RoleAdmin, "setting a concurrency limit"))
	s.api("DELETE /api/concurrency-limits/{key}", needQueueOf(s, noConcurrencyLimits, s.removeConcurrencyLimit), needs(RoleAdmin, "removing a concurrency limit"))

	s.api("GET /api/retry-budgets", s.listBudgets)
	s.api("GET /api/rate-limits", s.listRateLimits)

	s.api("GET /api/busiest-keys", needQueueOf(s, noBusiestKeys, s.listBusiestKeys))

	s.api("GET /api/find", needQueueOf(s, noFind, s.find))
	s.api("GET /api/items", s.needQueue(s.listItems))
	s.api("GET /api/items/{id}", s.needQueue(s.getItem))
	s.api("POST /api/items/{id}/cancel", s.needQueue(s.cancelItem), needs(RoleOperator, "cancelling a queue item"))
	s.api("POST /api/items/{id}/run-now", s.needQueue(s.runItemNow), needs(RoleOperator, "running a queue item now"))
	s.api("POST /api/items/actions", s.startItemBulkAction, needs(RoleOperator, "starting a bulk action on queue items"))
	s.api("GET /api/items/actions", s.listItemBulkActions)
	s.api("GET /api/items/actions/{id}", s.getItemBulkAction)
	s.api("POST /api/items/actions/{id}/cancel", s.cancelItemBulkAction, needs(RoleOperator, "cancelling a bulk action on queue items"))

	s.needs["GET /metrics"] = needs(RoleViewer, "reading the metrics")
	s.mux.Handle("GET /metrics", s.authorized(func(w http.ResponseWriter, r *http.Request, _ Principal) {
		if s.cfg.Metrics == nil {
			writeError(w, http.StatusNotFound, "no metrics handler is configured")
			return
		}
		s.cfg.Metrics.ServeHTTP(w, r)
	}))
}

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err)
	}
	return sub
}

// handlerFunc is an API handler: it runs for an authorized principal.
type handlerFunc func(w http.ResponseWriter, r *http.Request, principal string)

// api registers h at pattern for the principals whose role is need's or above. Without a need,
// a route of GET or HEAD (a read) needs RoleViewer and any other (a change) RoleOperator; give
// needs(RoleAdmin, …) for a route that changes the configuration. A principal whose role is
// too low is answered 403 naming their role and what the route needs.
func (s *server) api(pattern string, h handlerFunc, need ...routeNeed) {
	n := defaultNeed(pattern)
	if len(need) > 0 {
		n = need[0]
	}
	s.needs[pattern] = n
	s.mux.Handle(pattern, s.authorized(func(w http.ResponseWriter, r *http.Request, p Principal) {
		if p.Role < n.role {
			writeError(w, http.StatusForbidden, fmt.Sprintf("forbidden: %s is %s; %s needs the %s role", p.Name, withArticle(p.Role), n.doing, n.role))
			return
		}
		ctx, cancel := context.WithTimeoutCause(r.Context(), s.cfg.RequestTimeout, errRequestTimeout)
		defer cancel()
		h(w, r.WithContext(ctx), p.Name)
	}))
}

// routeNeed is the role a route needs, and what the route does, as its 403 says it
// ("replaying a dead letter").
type routeNeed struct {
	role  Role
	doing string
}

func needs(role Role, doing string) routeNeed { return routeNeed{role: role, doing: doing} }

// defaultNeed is the need of a route registered without one: RoleViewer for a read (GET or
// HEAD), RoleOperator for any other method, since it changes something; the route's pattern
// says what it does.
func defaultNeed(pattern string) routeNeed {
	method, _, _ := strings.Cut(pattern, " ")
	if method == http.MethodGet || method == http.MethodHead {
		return needs(RoleViewer, pattern)
	}
	return needs(RoleOperator, pattern)
}

// withArticle is "a viewer", "an operator", "an admin".
func withArticle(r Role) string {
	if s := r.String(); strings.IndexByte("aeiou", s[0]) >= 0 {
		return "an " + s
	}
	return "a " + r.String()
}

// errRequestTimeout is the cause of an API request's context that ran out of
// Config.RequestTimeout.
var errRequestTimeout = errors.New("the request ran out of admin.Config.RequestTimeout")

func (s *server) needBreakers(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, p string) {
		if len(s.breakerRegistries()) == 0 {
			writeError(w, http.StatusNotFound, "no breaker registry is configured")
			return
		}
		h(w, r, p)
	}
}

func (s *server) needQueue(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, p string) {
		if s.cfg.Queue == nil {
			writeError(w, http.StatusNotFound, "no durable queue is configured")
			return
		}
		h(w, r, p)
	}
}

// ServeHTTP sets the headers every response has, limits the body and routes; the mux's own
// 404 and 405 answers are rewritten as JSON errors (the 405 keeps its Allow header).
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// The dashboard needs nothing but its own scripts, styles and API (no inline code, no
	// other origin), so every response may forbid the rest: an injected value cannot run.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	if strings.HasPrefix(r.URL.Path, "/api/") || r.URL.Path == "/metrics" {
		h.Set("Cache-Control", "no-store")
	}
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	}
	if _, pattern := s.mux.Handler(r); pattern == "" {
		// No route: the mux answers 404, 405 (with Allow) or a redirect to the clean path.
		s.mux.ServeHTTP(&muxError{ResponseWriter: w, r: r}, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// muxError turns the plain-text 404 and 405 of the mux (or of the asset file server) into
// JSON errors.
type muxError struct {
	http.ResponseWriter
	r        *http.Request
	notFound string // the 404's message; "" means "no route <method> <path>"
	swallow  bool
}

func (m *muxError) WriteHeader(code int) {
	switch code {
	case http.StatusNotFound:
		m.swallow = true
		msg := m.notFound
		if msg == "" {
			msg = "no route " + m.r.Method + " " + m.r.URL.Path
		}
		writeError(m.ResponseWriter, code, msg)
	case http.StatusMethodNotAllowed:
		m.swallow = true
		writeError(m.ResponseWriter, code, "method "+m.r.Method+" not allowed for "+m.r.URL.Path+"; allowed: "+m.Header().Get("Allow"))
	default:
		m.ResponseWriter.WriteHeader(code)
	}
}

func (m *muxError) Write(b []byte) (int, error) {
	if m.swallow {
		return len(b), nil
	}
	return m.ResponseWriter.Write(b)
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	_ = enc.Encode(v)
}

type errorBody struct {
	Error string `json:"error"`
}

// maxErrorBytes bounds the message of an error answer: a request can make a long one (a
// path or parameter name of a megabyte echoed back), and a client needs only its start.
const maxErrorBytes = 1024

// writeError answers status with {"error": msg}, msg cut to maxErrorBytes.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Error: cut(msg, maxErrorBytes)})
}

// cut returns s when it has at most n bytes, else its first bytes up to n (on a rune
// boundary) followed by an ellipsis and the number of bytes left out.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + fmt.Sprintf("… (%d more bytes)", len(s)-i)
}

// internal answers a failure the client cannot fix: the details go to the log, not to the
// client. An error of the request's own context is answered as failed does, saying the
// request ended before its answer.
func (s *server) internal(w http.ResponseWriter, r *http.Request, err error) {
	s.failed(w, r, err, "the request ended before its answer")
}

// failed answers err of a route's call to the queue. An error of the request's context is not
// the server's, so it is neither answered 500 nor logged as an error (the log's errors stay
// the ones an operator must look at): a request whose client went away is answered 503 with
// ended and logged at debug level; one that ran out of RequestTimeout is answered 503 saying
// so, then ended, and logged as a warning. Any other error is a 500 with the details in the
// log.
func (s *server) failed(w http.ResponseWriter, r *http.Request, err error, ended string) {
	ctx := r.Context()
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if ctx.Err() != nil && errors.Is(context.Cause(ctx), errRequestTimeout) {
			s.log.Warn("admin: request ran out of its time", zap.String("method", r.Method), zap.String("path", r.URL.Path),
				zap.Duration("timeout", s.cfg.RequestTimeout), zap.Error(err))
			writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("the request took longer than %v (is the database answering?): %s", s.cfg.RequestTimeout, ended))
			return
		}
		s.log.Debug("admin: request ended by its client", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
		writeError(w, http.StatusServiceUnavailable, ended)
		return
	}
	if unreachable(err) {
		// An outage, which the queue's own log reports already: a 503 that says so, not an
		// internal error the operator must look up.
		s.log.Warn("admin: the database did not answer", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
		writeError(w, http.StatusServiceUnavailable, "the queue's database does not answer (is it down, or out of connections?): "+ended)
		return
	}
	s.log.Error("admin: request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
	writeError(w, http.StatusInternalServerError, "internal error; the server log has the details")
}

// unreachable reports whether err says the database could not be reached or stopped
// answering: a network error (refused, reset, timed out), or a connection database/sql knows
// to be broken.
func unreachable(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) || errors.Is(err, io.ErrUnexpectedEOF)
}

// What failed answers a request that ended first: a change may not have been written, a read
// was not finished.
const (
	leftBeforeChange = "the request ended before the change was written, or before that was confirmed"
	leftBeforeRead   = "the request ended before the answer was read"
)

// errBodyTooLarge is matched to answer 413.
var errBodyTooLarge = errors.New("request body too large")
