package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

// SendEmail is the application's durable work: the admin lists its items and dead letters.
type SendEmail struct {
	mediator.Command
	To      string `json:"to"`
	Subject string `json:"subject"`
}

// The endpoints the application calls, each guarded by its own breaker, keyed as
// httpcall.Authority keys a call to them (the scheme's default port made explicit), so the
// breakers of a pipeline keyed by httpcall.Authority are these.
const (
	smtpEndpoint = "https://smtp.example:443"
	smsEndpoint  = "https://sms.example:443"
)

// user is an account of the application; only its staff may use the admin, each with the
// admin role the application gives them.
type user struct {
	name, password string
	staff          bool       // may use the admin at all
	role           admin.Role // what they may do there: read, act on the work, configure
}

// app is the application: its accounts, its login sessions and its routes.
type app struct {
	users    map[string]user
	now      func() time.Time // the clock of the login sessions; time.Now, a test's own
	mu       sync.Mutex
	sessions map[string]login // session cookie value -> who logged in, until when
}

// login is one login session of the application.
type login struct {
	user    string
	expires time.Time
}

// loginTTL is how long a login lasts: a working day. A session that never ended would make
// a cookie copied from a shared machine, or kept by a browser, work for ever.
const loginTTL = 8 * time.Hour

// sessionCookie is the application's own login cookie; the admin handler never sees a password.
const sessionCookie = "app_session"

// userKey carries the logged-in user from the application's middleware to the admin's
// Authorizer.
var userKey = mediator.NewContextKey[user]("app-user")

func newApp() *app {
	return &app{users: map[string]user{
		"ada":   {name: "ada", password: randomHex(8), staff: true, role: admin.RoleOperator},
		"carol": {name: "carol", password: randomHex(8), staff: true, role: admin.RoleViewer},
		"bob":   {name: "bob", password: randomHex(8)},
	}, now: time.Now, sessions: map[string]login{}}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// routes is the application's mux: its own pages, its login, and the admin under /ops/.
func (a *app) routes(adm http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "the shop's home page; operators sign in at /login and work at /ops/")
	})
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>Sign in</title><form method="post" action="/login">`+
			`<label>User <input name="user" autocomplete="username"></label> `+
			`<label>Password <input name="password" type="password" autocomplete="current-password"></label> `+
			`<button>Sign in</button></form>`)
	})
	mux.HandleFunc("POST /login", a.login)
	// StripPrefix keeps the admin's routes relative to its mount; the dashboard's requests
	// are relative to its page, so they stay under /ops/ too.
	mux.Handle("/ops/", a.requireLogin(http.StripPrefix("/ops", adm)))
	// The application's own state-changing routes (the login form) get the same protection
	// from cross-site requests as the admin's.
	return http.NewCrossOriginProtection().Handler(mux)
}

// login checks a user's password and sets the application's session cookie.
func (a *app) login(w http.ResponseWriter, r *http.Request) {
	u, ok := a.users[r.PostFormValue("user")]
	if !ok || subtle.ConstantTimeCompare([]byte(u.password), []byte(r.PostFormValue("password"))) != 1 {
		http.Error(w, "wrong user or password", http.StatusUnauthorized)
		return
	}
	id := randomHex(32)
	expires := a.now().Add(loginTTL)
	a.mu.Lock()
	for k, l := range a.sessions { // the expired ones go as new ones come
		if !a.now().Before(l.expires) {
			delete(a.sessions, k)
		}
	}
	a.sessions[id] = login{user: u.name, expires: expires}
	a.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", Expires: expires, MaxAge: int(loginTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/ops/", http.StatusSeeOther)
}

// requireLogin lets through only requests of a logged-in user whose login has not expired,
// with the user in the context: a page is sent to the login form, an API request answered 401.
func (a *app) requireLogin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var u user
		ok, expired := false, false
		if c, err := r.Cookie(sessionCookie); err == nil {
			a.mu.Lock()
			l, found := a.sessions[c.Value]
			if found && !a.now().Before(l.expires) {
				delete(a.sessions, c.Value)
				found, expired = false, true
			}
			a.mu.Unlock()
			u, ok = a.users[l.user], found
		}
		switch {
		case ok:
			next.ServeHTTP(w, r.WithContext(userKey.With(r.Context(), u)))
		case strings.HasPrefix(r.URL.Path, "/ops/api/") || r.Method != http.MethodGet:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			if expired {
				fmt.Fprintln(w, `{"error": "your login expired: log in at /login again"}`)
				return
			}
			fmt.Fprintln(w, `{"error": "log in at /login first"}`)
		default:
			http.Redirect(w, r, "/login", http.StatusSeeOther)
		}
	})
}

// authorize is the admin's Authorizer: the user the application's login named, if one of its
// staff, with the admin role the application gives them (the admin checks it on each route).
// The Authorization header is not looked at, so the dashboard's sign-in (which sends whatever
// is typed in its token box) only fetches its CSRF token.
func authorize(r *http.Request) (admin.Principal, error) {
	u, ok := userKey.Get(r.Context())
	switch {
	case !ok:
		return admin.Principal{}, admin.ErrUnauthorized
	case !u.staff:
		return admin.Principal{}, fmt.Errorf("%s is not on the staff: %w", u.name, admin.ErrForbidden)
	}
	return admin.Principal{Name: u.name, Role: u.role}, nil
}

// options says how run runs; main gives the defaults, the test its own.
type options struct {
	addr  string // the application's listening address; 127.0.0.1:0 picks a free port
	serve bool   // after the tour, keep serving until ctx ends (Ctrl-C)
	// served, when set with serve, is called with the base URL and the users' passwords after
	// the tour, before the wait.
	served func(base string, passwords map[string]string)
}

// answer is one request of the tour and what came back.
type answer struct {
	who, method, path string
	status            int
	contentType       string
	location          string
	body              []byte
}

// summary is the tour's answers, for the test.
type summary struct {
	answers []answer
}

// find returns the answer to who's request method path.
func (s *summary) find(who, method, path string) (answer, bool) {
	for _, a := range s.answers {
		if a.who == who && a.method == method && a.path == path {
			return a, true
		}
	}
	return answer{}, false
}

func run(ctx context.Context, out io.Writer, dbPath string, opt options) (*summary, error) {
	queue, err := durable.Open(ctx, sqlite.Open(dbPath), durable.Config{})
	if err != nil {
		return nil, err
	}
	defer queue.Close()
	durable.Register[*SendEmail](queue, "email.send")

	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(_ context.Context, e *SendEmail) (mediator.Void, error) {
		if !strings.Contains(e.To, "@") {
			return mediator.Void{}, fmt.Errorf("address %q has no domain", e.To)
		}
		return mediator.Void{}, nil
	})
	if err := m.Build(); err != nil {
		return nil, err
	}
	defer m.Close()

	// Something for the admin to show: three emails waiting an hour, and a batch whose one
	// bad address became a dead letter.
	for _, to := range []string{"ann@example.com", "bo@example.com", "cy@example.com"} {
		if _, err := queue.Enqueue(ctx, &SendEmail{To: to, Subject: "your invoice"}, durable.WithDelay(time.Hour)); err != nil {
			return nil, err
		}
	}
	batch, err := queue.RunBatch(ctx, m, "newsletter", []durable.BatchItem{
		{Key: "sub-1", Request: &SendEmail{To: "dee@example.com", Subject: "news"}},
		{Key: "sub-2", Request: &SendEmail{To: "eve", Subject: "news"}},
	})
	if err != nil {
		return nil, err
	}
	if len(batch.DeadLetters) != 1 {
		return nil, fmt.Errorf("the batch made %d dead letters, want 1", len(batch.DeadLetters))
	}
	letter := fmt.Sprint(batch.DeadLetters[0])
	breakers := breaker.NewRegistry(breaker.Config{})
	breakers.Declare(smtpEndpoint, smsEndpoint) // listed, and trippable, before any traffic

	adm, err := admin.New(admin.Config{Queue: queue, Sender: m, Breakers: breakers, Authorizer: admin.AuthorizerFunc(authorize)})
	if err != nil {
		return nil, err
	}
	a := newApp()
	base, stop, err := listen(opt.addr, a.routes(adm))
	if err != nil {
		return nil, err
	}
	defer stop()
	fmt.Fprintf(out, "the application listens on %s; the admin is mounted at %sops/\n", base, base)

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &tour{base: base, out: out, tr: tr, sum: &summary{}}
	anon, bob, carol, ada := c.client("nobody"), c.client("bob"), c.client("carol"), c.client("ada")

	fmt.Fprintln(out, "1. nobody has logged in: the application's middleware keeps them out of /ops/")
	c.do(anon, "GET", "/ops/api/queue", nil, nil)
	c.do(anon, "GET", "/ops/", nil, nil)

	fmt.Fprintln(out, "2. bob logs in; he is not on the staff, so the admin's Authorizer forbids him")
	c.login(bob, a.users["bob"])
	c.do(bob, "GET", "/ops/api/queue", nil, nil)

	key := url.PathEscape(smsEndpoint)
	fmt.Fprintln(out, "3. carol logs in; she is a viewer: she reads, and the admin refuses her a change")
	c.login(carol, a.users["carol"])
	c.do(carol, "GET", "/ops/api/queue", nil, nil)
	c.do(carol, "POST", "/ops/api/breakers/"+key+"/trip", nil, nil)

	fmt.Fprintln(out, "4. ada logs in; she is an operator")
	c.login(ada, a.users["ada"])
	if q, ok := c.do(ada, "GET", "/ops/api/queue", nil, nil); ok {
		var v struct {
			Items       map[string]int `json:"items"`
			DeadLetters map[string]int `json:"dead_letters"`
		}
		if err := json.Unmarshal(q.body, &v); err == nil {
			fmt.Fprintf(out, "     items: %d pending, %d succeeded; dead letters: %d failed\n",
				v.Items["pending"], v.Items["succeeded"], v.DeadLetters["failed"])
		}
	}
	c.listBreakers(ada)
	c.do(ada, "POST", "/ops/api/breakers/"+key+"/trip", nil, nil)
	c.listBreakers(ada)
	// The admin records the application's user as the actor of what she does.
	c.do(ada, "POST", "/ops/api/dead-letters/"+letter+"/discard", strings.NewReader(`{"reason": "eve left no address"}`),
		http.Header{"Content-Type": {"application/json"}})
	if d, ok := c.do(ada, "GET", "/ops/api/dead-letters/"+letter, nil, nil); ok {
		var v struct {
			DeadLetter struct {
				Status string `json:"status"`
				Error  string `json:"error"`
			} `json:"dead_letter"`
			Timeline []struct {
				Kind, Actor, Reason string
			} `json:"timeline"`
		}
		if err := json.Unmarshal(d.body, &v); err == nil {
			fmt.Fprintf(out, "     letter %s (%s): %s", letter, v.DeadLetter.Error, v.DeadLetter.Status)
			for _, e := range v.Timeline {
				if e.Kind == "discard" {
					fmt.Fprintf(out, " by %s, reason %q", e.Actor, e.Reason)
				}
			}
			fmt.Fprintln(out)
		}
	}
	// Setting a concurrency limit changes the configuration: it needs an admin.
	c.do(ada, "PUT", "/ops/api/concurrency-limits/"+key, strings.NewReader(`{"max": 2}`), http.Header{"Content-Type": {"application/json"}})
	c.do(ada, "GET", "/ops/", nil, nil)
	c.do(ada, "GET", "/ops/assets/app.js", nil, nil)
	// What the dashboard does when ada signs in: the token box's text is not looked at.
	if s, ok := c.do(ada, "POST", "/ops/api/session", nil, http.Header{"Authorization": {"Bearer anything"}}); ok {
		var v struct {
			Principal string `json:"principal"`
			Role      string `json:"role"`
		}
		_ = json.Unmarshal(s.body, &v)
		fmt.Fprintf(out, "     the dashboard's session is ada's: principal %q, role %q\n", v.Principal, v.Role)
	}

	fmt.Fprintln(out, "5. a page on another site makes ada's browser post to the admin: refused")
	c.do(ada, "POST", "/ops/api/breakers/"+key+"/reset", nil, http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}})
	if c.err != nil {
		return nil, c.err
	}

	if opt.serve {
		fmt.Fprintf(out, "serving until Ctrl-C: sign in at %slogin as ada (password %s, an operator), carol (password %s, a viewer)\n",
			base, a.users["ada"].password, a.users["carol"].password)
		fmt.Fprintf(out, "or bob (password %s, not on the staff); a login lasts %v,\n", a.users["bob"].password, loginTTL)
		fmt.Fprintf(out, "then open %sops/ and type anything in its token box: the login already says who you are\n", base)
		if opt.served != nil {
			opt.served(base, map[string]string{"ada": a.users["ada"].password, "carol": a.users["carol"].password, "bob": a.users["bob"].password})
		}
		<-ctx.Done()
	}
	return c.sum, nil
}

// tour is the program acting as the application's client.
type tour struct {
	base string
	out  io.Writer
	tr   *http.Transport
	sum  *summary
	err  error // the first request that could not be made
}

// client returns the browser of who: its own cookie jar, redirects not followed (so that
// they are printed).
func (c *tour) client(who string) *named {
	jar, _ := cookiejar.New(nil) // never fails without options
	return &named{who: who, Client: &http.Client{
		Transport: c.tr, Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// named is the client of one user of the tour.
type named struct {
	who string
	*http.Client
}

func (c *tour) login(n *named, u user) {
	form := url.Values{"user": {u.name}, "password": {u.password}}.Encode()
	c.do(n, "POST", "/login", strings.NewReader(form), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
}

// listBreakers prints the breakers /ops/api/breakers lists.
func (c *tour) listBreakers(n *named) {
	b, ok := c.do(n, "GET", "/ops/api/breakers", nil, nil)
	if !ok {
		return
	}
	var v struct {
		Breakers []breaker.Snapshot `json:"breakers"`
	}
	if err := json.Unmarshal(b.body, &v); err != nil {
		fmt.Fprintf(c.out, "     (not a breaker list: %v)\n", err)
		return
	}
	for _, s := range v.Breakers {
		fmt.Fprintf(c.out, "     breaker %s: %s\n", s.Key, s.State)
	}
}

// do sends one request as n, prints its answer and keeps it; ok is false when it could not be
// made (the first such error is c.err).
func (c *tour) do(n *named, method, path string, body io.Reader, h http.Header) (answer, bool) {
	req, err := http.NewRequest(method, strings.TrimSuffix(c.base, "/")+path, body)
	if err != nil {
		c.err = firstErr(c.err, err)
		return answer{}, false
	}
	for k, v := range h {
		req.Header[k] = v
	}
	res, err := n.Do(req)
	if err != nil {
		c.err = firstErr(c.err, err)
		fmt.Fprintf(c.out, "   %s: %s %s: %v\n", n.who, method, path, err)
		return answer{}, false
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	a := answer{who: n.who, method: method, path: path, status: res.StatusCode,
		contentType: res.Header.Get("Content-Type"), location: res.Header.Get("Location"), body: b}
	c.sum.answers = append(c.sum.answers, a)
	fmt.Fprintf(c.out, "   %s: %s %s -> %s%s\n", n.who, method, path, res.Status, describe(a))
	return a, a.status/100 == 2
}

// describe says what an answer is: where a redirect goes, a JSON error, a page's title.
func describe(a answer) string {
	switch {
	case a.location != "":
		return " to " + a.location
	case strings.HasPrefix(a.contentType, "application/json") && a.status >= 400:
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(a.body, &e) == nil && e.Error != "" {
			return ": " + e.Error
		}
	case strings.HasPrefix(a.contentType, "text/html"):
		if _, t, ok := strings.Cut(string(a.body), "<title>"); ok {
			t, _, _ = strings.Cut(t, "</title>")
			return fmt.Sprintf(" (%s, %q)", a.contentType, html.UnescapeString(t))
		}
	case a.status < 300 && !strings.HasPrefix(a.contentType, "application/json"):
		return fmt.Sprintf(" (%s, %d bytes)", a.contentType, len(a.body))
	}
	if a.status >= 400 {
		return ": " + strings.TrimSpace(string(a.body))
	}
	return ""
}

// firstErr keeps the first error.
func firstErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// listen serves h on addr; it returns the base URL and the function that stops it.
func listen(addr string, h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	return "http://" + ln.Addr().String() + "/", func() {
		_ = srv.Close()
		<-served
	}, nil
}

func main() {
	keep := flag.String("db", "", "SQLite file to keep the queue in (default: a temporary file)")
	addr := flag.String("addr", "127.0.0.1:0", "the application's listening address")
	serve := flag.Bool("serve", false, "keep the application up after the tour until Ctrl-C, to open the dashboard in a browser")
	flag.Parse()
	// The work runs in a function, so that its deferred clean-up (the temporary directory)
	// runs before an exit with an error.
	err := func() error {
		path := *keep
		if path == "" {
			dir, err := os.MkdirTemp("", "switchboard-adminmount")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			path = filepath.Join(dir, "queue.db")
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		_, err := run(ctx, os.Stdout, path, options{addr: *addr, serve: *serve})
		return err
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
