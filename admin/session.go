package admin

import (
	"cmp"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// cookieName is the session cookie of the dashboard.
const cookieName = "switchboard_admin"

// csrfHeader carries the session's CSRF token on every state-changing request made with the
// session cookie.
const csrfHeader = "X-CSRF-Token"

// maxSessions bounds the sessions held: past it, the oldest is dropped.
const maxSessions = 10_000

type session struct {
	principal Principal // with the role the Authorizer gave when the session was made
	csrf      string
	expires   time.Time
}

// sessions holds the dashboard's sessions in memory, keyed by the cookie's random value.
// Expired ones are dropped as new ones are made; no goroutine runs.
type sessions struct {
	mu  sync.Mutex
	m   map[string]session
	now func() time.Time
	ttl time.Duration
}

func newSessions(now func() time.Time, ttl time.Duration) *sessions {
	return &sessions{m: map[string]session{}, now: now, ttl: ttl}
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics if the system's source does)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (s *sessions) create(principal Principal) (id string, sess session) {
	now := s.now()
	sess = session{principal: principal, csrf: randomToken(), expires: now.Add(s.ttl)}
	id = randomToken()
	s.mu.Lock()
	defer s.mu.Unlock()
	var oldestID string
	var oldest time.Time
	for k, v := range s.m {
		if !now.Before(v.expires) {
			delete(s.m, k)
		} else if oldestID == "" || v.expires.Before(oldest) {
			oldestID, oldest = k, v.expires
		}
	}
	if len(s.m) >= maxSessions {
		delete(s.m, oldestID)
	}
	s.m[id] = sess
	return id, sess
}

func (s *sessions) get(id string) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.m[id]
	if ok && !s.now().Before(sess.expires) {
		delete(s.m, id)
		return session{}, false
	}
	return sess, ok
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// authorized runs h for an authorized principal, whatever their role (api checks it). A request whose Authorization header carries
// credentials is judged by the Authorizer; otherwise a valid session cookie authorizes it, and a
// state-changing request made with the cookie must carry the session's CSRF token; otherwise
// the Authorizer judges it (an application's own single sign-on cookie, for example).
func (s *server) authorized(h func(w http.ResponseWriter, r *http.Request, p Principal)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !presentsCredentials(r) {
			if sess, _, ok := s.cookieSession(r); ok {
				if !safeMethod(r.Method) && !csrfMatches(r.Header.Get(csrfHeader), sess.csrf) {
					writeError(w, http.StatusForbidden, "missing or wrong "+csrfHeader+" header: a state-changing request with the session cookie must carry the session's CSRF token")
					return
				}
				h(w, r, sess.principal)
				return
			}
		}
		p, ok := s.authorize(w, r)
		if ok {
			h(w, r, p)
		}
	})
}

// authorize asks the Authorizer, and answers when it refuses: 401 (with a Bearer challenge) to a
// request that presented no credentials, 403 to one whose credentials were refused.
func (s *server) authorize(w http.ResponseWriter, r *http.Request) (Principal, bool) {
	p, err := s.auth.Authorize(r)
	if err == nil && p.Name == "" {
		err = errors.New("the authorizer named no principal")
	}
	if err == nil && !p.Role.known() {
		// A role past RoleAdmin is no more than an admin, and one below RoleViewer less than
		// a viewer: neither is granted, and the application's authorizer has a bug to fix.
		s.log.Error("admin: the authorizer gave an unknown role", zap.String("principal", p.Name), zap.Int("role", int(p.Role)))
		err = fmt.Errorf("the authorizer gave %s the role %v, which is none of viewer, operator and admin: %w", p.Name, p.Role, ErrForbidden)
	}
	// An authorizer of the application's says why in its own words (a viewer, an expired
	// session): they are the answer's, after the status's word. Ours say what to send.
	own := ""
	if err != nil && err != ErrForbidden && err != ErrUnauthorized && err != errInvalidToken && err != errNotBearer {
		own = err.Error()
	}
	switch {
	case err == nil:
		return p, true
	case errors.Is(err, ErrForbidden):
		writeError(w, http.StatusForbidden, "forbidden: "+cmp.Or(own, "the principal may not use the admin"))
	case presentsCredentials(r):
		// Credentials were presented and refused: the caller is known to have tried, and asking
		// again (401) would not help. 401 is for a request that presented none.
		why := "the credentials were refused (wrong token)"
		if err == errNotBearer {
			scheme, _, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
			why = "the credentials were refused: the Authorization header uses the " + quote(scheme) + " scheme, not Bearer; send Authorization: Bearer <token>"
		}
		writeError(w, http.StatusForbidden, "forbidden: "+cmp.Or(own, why))
	case r.Header.Get("Authorization") != "":
		w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard admin"`)
		writeError(w, http.StatusUnauthorized, "unauthorized: "+cmp.Or(own, "the Authorization header names the Bearer scheme with no token; send Authorization: Bearer <token>, or a session cookie"))
	case sentSessionCookie(r):
		w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard admin"`)
		writeError(w, http.StatusUnauthorized, "unauthorized: "+cmp.Or(own, "the session cookie names no session of this server (it ended, or it was made before a restart or by another instance: sessions live in one process's memory); send Authorization: Bearer <token> to start one"))
	default:
		w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard admin"`)
		writeError(w, http.StatusUnauthorized, "unauthorized: "+cmp.Or(own, "send Authorization: Bearer <token>, or a session cookie"))
	}
	return Principal{}, false
}

// presentsCredentials reports whether r's Authorization header carries credentials: an
// absent or blank header, or the Bearer scheme with no token after it (a client whose token
// variable was empty), carries none.
func presentsCredentials(r *http.Request) bool {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	scheme, tok, _ := strings.Cut(h, " ")
	return h != "" && !(strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(tok) == "")
}

// sessionCookie returns the value of r's session cookie, known or not; empty when there is none.
func sessionCookie(r *http.Request) string {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return ""
	}
	return c.Value
}

// sentSessionCookie reports whether r carries a session cookie, known or not.
func sentSessionCookie(r *http.Request) bool { return sessionCookie(r) != "" }

func (s *server) cookieSession(r *http.Request) (session, string, bool) {
	v := sessionCookie(r)
	if v == "" {
		return session{}, "", false
	}
	sess, ok := s.sessions.get(v)
	return sess, v, ok
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

func csrfMatches(got, want string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

type sessionBody struct {
	CSRFToken string `json:"csrf_token,omitempty"`
	Principal string `json:"principal"`
	Role      Role   `json:"role"`
}

// postSession exchanges the Authorizer's credentials (the bearer token) for a session cookie
// and a CSRF token. A session cookie alone does not make a new session.
func (s *server) postSession(w http.ResponseWriter, r *http.Request) {
	if !decodeBody(w, r, &struct{}{}) {
		return
	}
	p, ok := s.authorize(w, r)
	if !ok {
		return
	}
	if old, err := r.Cookie(cookieName); err == nil {
		s.sessions.end(old.Value)
	}
	id, sess := s.sessions.create(p)
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: id, Path: mountPath(r, "/api/session"),
		Expires: sess.expires, MaxAge: int(s.cfg.SessionTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || s.cfg.SecureCookies,
	})
	writeJSON(w, http.StatusOK, sessionBody{CSRFToken: sess.csrf, Principal: p.Name, Role: p.Role})
}

// getSession names the principal and their role; with the session cookie it gives the
// session's CSRF token again, so that a reloaded dashboard can go on (a cross-site page cannot
// read the answer). It is registered with the mux by routes, not through api, since it needs
// the role, which api's handlers are not given.
func (s *server) getSession(w http.ResponseWriter, r *http.Request, p Principal) {
	body := sessionBody{Principal: p.Name, Role: p.Role}
	if !presentsCredentials(r) {
		if sess, _, ok := s.cookieSession(r); ok {
			body.CSRFToken = sess.csrf
		}
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *server) deleteSession(w http.ResponseWriter, r *http.Request, _ string) {
	if _, id, ok := s.cookieSession(r); ok {
		s.sessions.end(id)
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: "", Path: mountPath(r, "/api/session"), MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || s.cfg.SecureCookies,
	})
	writeJSON(w, http.StatusOK, struct{}{})
}

// mountPath returns the path the handler is mounted under, with a trailing slash: the
// request's original path (RequestURI, before any http.StripPrefix) less route.
func mountPath(r *http.Request, route string) string {
	u, err := url.ParseRequestURI(r.RequestURI)
	if err != nil {
		return "/"
	}
	p := u.EscapedPath()
	if !strings.HasSuffix(p, route) {
		return "/"
	}
	p = strings.TrimSuffix(p, route) + "/"
	if !strings.HasPrefix(p, "/") {
		return "/"
	}
	return p
}
