package admin_test

// A small in-memory implementation of the admin API contract (docs/operations.md), so the
// dashboard's browser tests run without a database: the same routes, JSON shapes, session
// exchange and CSRF rule as the real handler, serving the page from ui/ on disk.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

const fakeCookie = "switchboard_admin"

type fakeBreaker struct {
	Key      string
	State    string
	Failures int
	OpenedAt time.Time
	Cooldown time.Duration
}

type fakeEvent struct {
	Kind      string    `json:"kind"`
	Number    int       `json:"number"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
	Instance  string    `json:"instance"`
	Actor     string    `json:"actor"`
	Outcome   string    `json:"outcome"`
	Error     string    `json:"error"`
	Reason    string    `json:"reason"`
}

type fakeLetter struct {
	ID         int64     `json:"id"`
	ItemID     int64     `json:"item_id"`
	Source     string    `json:"source"`
	Name       string    `json:"name"`
	Key        string    `json:"key"`
	Error      string    `json:"error"`
	Status     string    `json:"status"`
	RetryCount int       `json:"retry_count"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`

	payload    any         // JSON value or string
	timeline   []fakeEvent // oldest first
	failReplay bool        // a replay of it fails again
}

type fakeSchedule struct {
	Name          string     `json:"name"`
	Spec          string     `json:"spec"`
	Location      string     `json:"location"`
	NextRun       time.Time  `json:"next_run"`
	RunningOn     string     `json:"running_on"`
	LastStartedAt *time.Time `json:"last_started_at"`
	LastEndedAt   *time.Time `json:"last_ended_at"`
	LastOutcome   string     `json:"last_outcome"`
	LastError     string     `json:"last_error"`
}

type fakeAPI struct {
	token string
	csp   string

	mu        sync.Mutex
	sessions  map[string]string // cookie value → CSRF token
	breakers  map[string]*fakeBreaker
	letters   []*fakeLetter
	schedules []fakeSchedule
	posts     []string // "METHOD path" of every state-changing request that passed the checks
}

// strictCSP is what the fake serves the page with: no inline script or style, no other origin.
const strictCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// newFakeAPI returns a fake with two open breakers, a closed one, six failed dead letters
// (the fourth fails again when replayed), two schedules.
func newFakeAPI(token string) *fakeAPI {
	now := time.Now().UTC()
	f := &fakeAPI{token: token, csp: strictCSP, sessions: map[string]string{}, breakers: map[string]*fakeBreaker{}}
	for _, b := range []*fakeBreaker{
		{Key: "https://api.payments.example/v1/charge?region=eu", State: "open", Failures: 5, OpenedAt: now.Add(-20 * time.Second), Cooldown: 5 * time.Minute},
		{Key: "crm sync 100%", State: "open", Failures: 7, OpenedAt: now.Add(-10 * time.Second), Cooldown: 90 * time.Second},
		{Key: "mailer", State: "closed", Failures: 1},
		{Key: "search-index", State: "half-open", Failures: 5, OpenedAt: now.Add(-2 * time.Minute), Cooldown: time.Minute},
	} {
		f.breakers[b.Key] = b
	}
	letter := func(id int64, source, name, key, errText string, payload any, attempts int) *fakeLetter {
		created := now.Add(-time.Duration(70-id) * time.Minute)
		l := &fakeLetter{ID: id, ItemID: 100 + id, Source: source, Name: name, Key: key, Error: errText,
			Status: "failed", CreatedAt: created, UpdatedAt: created, payload: payload}
		for n := 1; n <= attempts; n++ {
			start := created.Add(-time.Duration(attempts-n) * 30 * time.Second)
			l.timeline = append(l.timeline, fakeEvent{Kind: "attempt", Number: n, StartedAt: start,
				EndedAt: start.Add(120 * time.Millisecond), Instance: "worker-1", Outcome: "failed", Error: errText})
		}
		return l
	}
	f.letters = []*fakeLetter{
		letter(1, "crm-sync", "ImportContact", "contact/ann@example",
			"mapping: field \"email\" is required", map[string]any{"email": "ann@example", "name": "Ann", "tags": []string{"vip", "eu"}}, 3),
		letter(2, "crm-sync", "ImportContact", "contact/empty", "mapping: empty record", map[string]any{}, 1),
		letter(3, "payments", "ChargeCard", "order-7781", "POST https://api.payments.example/v1/charge: 503 Service Unavailable", map[string]any{"order": 7781, "amount_cents": 1299}, 5),
		letter(4, "payments", "ChargeCard", "order-7790", "card declined: <script>alert(1)</script>", map[string]any{"order": 7790, "amount_cents": 4500}, 5),
		letter(5, "mailer", "SendReceipt", "receipt-7790", "smtp: 421 try again later", "not json: <b>raw</b> bytes", 4),
		letter(6, "mailer", "SendReceipt", "receipt-7791", "smtp: 421 try again later", map[string]any{"to": "bob@example"}, 4),
	}
	f.letters[3].failReplay = true
	last := now.Add(-13 * time.Minute)
	lastEnd := last.Add(4 * time.Second)
	f.schedules = []fakeSchedule{
		{Name: "nightly-report", Spec: "0 7 * * *", Location: "Europe/Amsterdam", NextRun: now.Add(9 * time.Hour).Truncate(time.Hour),
			LastStartedAt: &last, LastEndedAt: &lastEnd, LastOutcome: "succeeded"},
		{Name: "crm-pull", Spec: "@every 15m", Location: "UTC", NextRun: now.Add(2 * time.Minute).Truncate(time.Second),
			LastStartedAt: &last, LastEndedAt: &lastEnd, LastOutcome: "failed", LastError: "crm: 502 Bad Gateway"},
	}
	return f
}

// Handler returns the fake mounted at its root; the tests mount it under /admin/ with
// http.StripPrefix, as an application does with the real one.
func (f *fakeAPI) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", f.page)
	mux.Handle("GET /assets/", http.FileServerFS(os.DirFS("ui")))

	mux.HandleFunc("POST /api/session", f.createSession)
	mux.HandleFunc("GET /api/session", f.auth(func(w http.ResponseWriter, r *http.Request, who string) {
		writeJSON(w, 200, map[string]any{"principal": who})
	}))
	mux.HandleFunc("DELETE /api/session", f.auth(f.deleteSession))

	mux.HandleFunc("GET /api/breakers", f.auth(f.listBreakers))
	mux.HandleFunc("GET /api/breakers/{key}", f.auth(f.getBreaker))
	mux.HandleFunc("POST /api/breakers/{key}/trip", f.auth(f.breakerAction))
	mux.HandleFunc("POST /api/breakers/{key}/reset", f.auth(f.breakerAction))

	mux.HandleFunc("GET /api/dead-letters", f.auth(f.listLetters))
	mux.HandleFunc("GET /api/dead-letters/{id}", f.auth(f.getLetter))
	mux.HandleFunc("POST /api/dead-letters/{id}/replay", f.auth(f.letterAction))
	mux.HandleFunc("POST /api/dead-letters/{id}/discard", f.auth(f.letterAction))
	mux.HandleFunc("POST /api/dead-letters/replay", f.auth(f.bulkAction))
	mux.HandleFunc("POST /api/dead-letters/discard", f.auth(f.bulkAction))

	mux.HandleFunc("GET /api/schedules", f.auth(f.listSchedules))
	mux.HandleFunc("GET /api/schedules/{name}/runs", f.auth(f.listRuns))
	mux.HandleFunc("GET /api/queue", f.auth(f.queue))
	return mux
}

func (f *fakeAPI) page(w http.ResponseWriter, r *http.Request) {
	body, err := os.ReadFile("ui/index.html")
	if err != nil {
		writeError(w, 500, err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", f.csp)
	w.Write(body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func randomHex() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (f *fakeAPI) bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	return tok, ok
}

// auth accepts a bearer token, or the session cookie plus X-CSRF-Token on a POST or DELETE.
func (f *fakeAPI) auth(next func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if tok, ok := f.bearer(r); ok {
			if tok != f.token {
				writeError(w, 403, "wrong token")
				return
			}
		} else {
			c, err := r.Cookie(fakeCookie)
			f.mu.Lock()
			csrf, known := "", false
			if err == nil {
				csrf, known = f.sessions[c.Value]
			}
			f.mu.Unlock()
			if !known {
				writeError(w, 401, "no session")
				return
			}
			if r.Method != http.MethodGet && r.Header.Get("X-CSRF-Token") != csrf {
				writeError(w, 403, "missing or wrong X-CSRF-Token")
				return
			}
		}
		if r.Method != http.MethodGet {
			f.mu.Lock()
			f.posts = append(f.posts, r.Method+" "+r.URL.Path)
			f.mu.Unlock()
		}
		next(w, r, "admin")
	}
}

func (f *fakeAPI) createSession(w http.ResponseWriter, r *http.Request) {
	tok, ok := f.bearer(r)
	if !ok {
		writeError(w, 401, "missing bearer token")
		return
	}
	if tok != f.token {
		writeError(w, 403, "wrong token")
		return
	}
	id, csrf := randomHex(), randomHex()
	f.mu.Lock()
	f.sessions[id] = csrf
	f.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: fakeCookie, Value: id, Path: "/admin/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	writeJSON(w, 200, map[string]string{"csrf_token": csrf, "principal": "admin"})
}

func (f *fakeAPI) deleteSession(w http.ResponseWriter, r *http.Request, _ string) {
	if c, err := r.Cookie(fakeCookie); err == nil {
		f.mu.Lock()
		delete(f.sessions, c.Value)
		f.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: fakeCookie, Path: "/admin/", MaxAge: -1})
	w.WriteHeader(http.StatusNoContent)
}

func (f *fakeAPI) breakerJSON(b *fakeBreaker) map[string]any {
	out := map[string]any{"key": b.Key, "state": b.State, "failures": b.Failures,
		"opened_at": nil, "remaining_ms": 0, "probe_at": nil}
	if b.State != "closed" {
		out["opened_at"] = b.OpenedAt
	}
	if b.State == "open" {
		probe := b.OpenedAt.Add(b.Cooldown)
		out["remaining_ms"] = max(0, time.Until(probe).Milliseconds())
		out["probe_at"] = probe
	}
	return out
}

func (f *fakeAPI) listBreakers(w http.ResponseWriter, r *http.Request, _ string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := make([]string, 0, len(f.breakers))
	for k := range f.breakers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	list := []any{}
	for _, k := range keys {
		list = append(list, f.breakerJSON(f.breakers[k]))
	}
	writeJSON(w, 200, map[string]any{"breakers": list})
}

func (f *fakeAPI) getBreaker(w http.ResponseWriter, r *http.Request, _ string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.breakers[r.PathValue("key")]
	if !ok {
		writeError(w, 404, "unknown breaker")
		return
	}
	writeJSON(w, 200, f.breakerJSON(b))
}

func (f *fakeAPI) breakerAction(w http.ResponseWriter, r *http.Request, _ string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.breakers[r.PathValue("key")]
	if !ok {
		writeError(w, 404, "unknown breaker")
		return
	}
	if strings.HasSuffix(r.URL.Path, "/trip") {
		b.State, b.OpenedAt = "open", time.Now()
		if b.Cooldown == 0 {
			b.Cooldown = 30 * time.Second
		}
	} else {
		b.State, b.Failures = "closed", 0
	}
	writeJSON(w, 200, f.breakerJSON(b))
}

// Breaker returns a copy of a breaker's state.
func (f *fakeAPI) Breaker(key string) fakeBreaker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *f.breakers[key]
}

// Letter returns a copy of a dead letter and its timeline.
func (f *fakeAPI) Letter(id int64) (fakeLetter, []fakeEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.letters {
		if l.ID == id {
			return *l, slices.Clone(l.timeline)
		}
	}
	return fakeLetter{}, nil
}

func (f *fakeAPI) listLetters(w http.ResponseWriter, r *http.Request, _ string) {
	q := r.URL.Query()
	status := q.Get("status")
	if status == "" {
		status = "failed"
	}
	var from, to time.Time
	for _, p := range []struct {
		name string
		t    *time.Time
	}{{"from", &from}, {"to", &to}} {
		if v := q.Get(p.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				writeError(w, 400, p.name+": not an RFC 3339 time")
				return
			}
			*p.t = t
		}
	}
	limit, offset := 50, 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			writeError(w, 400, "limit: not a number from 1 to 500")
			return
		}
		limit = n
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, 400, "offset: not a non-negative number")
			return
		}
		offset = n
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var match []*fakeLetter
	for i := len(f.letters) - 1; i >= 0; i-- { // newest first
		l := f.letters[i]
		if l.Status != status || (q.Get("source") != "" && l.Source != q.Get("source")) ||
			(!from.IsZero() && l.CreatedAt.Before(from)) || (!to.IsZero() && !l.CreatedAt.Before(to)) {
			continue
		}
		match = append(match, l)
	}
	total := len(match)
	page := match[min(offset, total):min(offset+limit, total)]
	if page == nil {
		page = []*fakeLetter{}
	}
	writeJSON(w, 200, map[string]any{"dead_letters": page, "total": total})
}

func (f *fakeAPI) letterID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		writeError(w, 400, "id: not a positive integer")
		return 0, false
	}
	return id, true
}

func (f *fakeAPI) find(id int64) *fakeLetter {
	for _, l := range f.letters {
		if l.ID == id {
			return l
		}
	}
	return nil
}

func (f *fakeAPI) getLetter(w http.ResponseWriter, r *http.Request, _ string) {
	id, ok := f.letterID(w, r)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.find(id)
	if l == nil {
		writeError(w, 404, "unknown dead letter")
		return
	}
	raw, _ := json.Marshal(l)
	var d map[string]any
	json.Unmarshal(raw, &d)
	d["payload"] = l.payload
	writeJSON(w, 200, map[string]any{"dead_letter": d, "timeline": l.timeline})
}

type fakeResult struct {
	ID         int64  `json:"id"`
	Resolution string `json:"resolution"`
	Error      string `json:"error"`
}

// resolve replays or discards one letter; the caller holds f.mu.
func (f *fakeAPI) resolve(id int64, replay bool, who, reason string) fakeResult {
	l := f.find(id)
	if l == nil {
		return fakeResult{ID: id, Resolution: "not_found", Error: "dead letter not found"}
	}
	if l.Status != "failed" {
		return fakeResult{ID: id, Resolution: "conflict", Error: "dead letter is " + l.Status}
	}
	now := time.Now().UTC()
	l.UpdatedAt = now
	if !replay {
		l.Status = "discarded"
		l.timeline = append(l.timeline, fakeEvent{Kind: "discard", StartedAt: now, EndedAt: now, Actor: who, Reason: reason})
		return fakeResult{ID: id, Resolution: "discarded"}
	}
	l.RetryCount++
	if l.failReplay {
		l.timeline = append(l.timeline, fakeEvent{Kind: "replay", StartedAt: now, EndedAt: now, Actor: who, Outcome: "failed", Error: l.Error})
		return fakeResult{ID: id, Resolution: "still_failed", Error: l.Error}
	}
	l.Status = "replayed"
	l.timeline = append(l.timeline, fakeEvent{Kind: "replay", StartedAt: now, EndedAt: now, Actor: who, Outcome: "succeeded"})
	return fakeResult{ID: id, Resolution: "replayed"}
}

// readBody decodes a JSON body strictly, as the contract asks: 64 KiB, no unknown fields.
func readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		writeError(w, 400, "body: "+err.Error())
		return false
	}
	return true
}

func (f *fakeAPI) letterAction(w http.ResponseWriter, r *http.Request, who string) {
	id, ok := f.letterID(w, r)
	if !ok {
		return
	}
	replay := strings.HasSuffix(r.URL.Path, "/replay")
	var body struct {
		Reason string `json:"reason"`
	}
	if !replay {
		if !readBody(w, r, &body) {
			return
		}
		if strings.TrimSpace(body.Reason) == "" {
			writeError(w, 400, "reason: required")
			return
		}
	}
	f.mu.Lock()
	res := f.resolve(id, replay, who, body.Reason)
	f.mu.Unlock()
	status := 200
	switch res.Resolution {
	case "not_found":
		status = 404
	case "conflict":
		status = 409
	}
	writeJSON(w, status, res)
}

func (f *fakeAPI) bulkAction(w http.ResponseWriter, r *http.Request, who string) {
	replay := strings.HasSuffix(r.URL.Path, "/replay")
	var body struct {
		IDs    []int64 `json:"ids"`
		Reason string  `json:"reason"`
	}
	if !readBody(w, r, &body) {
		return
	}
	if len(body.IDs) == 0 || len(body.IDs) > 100 {
		writeError(w, 400, "ids: from 1 to 100 ids")
		return
	}
	if replay && body.Reason != "" {
		writeError(w, 400, `body: unknown field "reason"`)
		return
	}
	if !replay && strings.TrimSpace(body.Reason) == "" {
		writeError(w, 400, "reason: required")
		return
	}
	f.mu.Lock()
	results := make([]fakeResult, 0, len(body.IDs))
	for _, id := range body.IDs {
		results = append(results, f.resolve(id, replay, who, body.Reason))
	}
	f.mu.Unlock()
	writeJSON(w, 200, map[string]any{"results": results})
}

func (f *fakeAPI) listSchedules(w http.ResponseWriter, r *http.Request, _ string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	writeJSON(w, 200, map[string]any{"schedules": f.schedules})
}

func (f *fakeAPI) listRuns(w http.ResponseWriter, r *http.Request, _ string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.schedules {
		if s.Name != r.PathValue("name") {
			continue
		}
		runs := []map[string]any{}
		if s.LastStartedAt != nil {
			runs = append(runs, map[string]any{"id": 1, "instance": "worker-1", "due_at": s.LastStartedAt,
				"started_at": s.LastStartedAt, "ended_at": s.LastEndedAt, "outcome": s.LastOutcome, "error": s.LastError})
		}
		writeJSON(w, 200, map[string]any{"runs": runs})
		return
	}
	writeError(w, 404, "unknown schedule")
}

func (f *fakeAPI) queue(w http.ResponseWriter, r *http.Request, _ string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	dl := map[string]int{"failed": 0, "replayed": 0, "discarded": 0}
	for _, l := range f.letters {
		dl[l.Status]++
	}
	writeJSON(w, 200, map[string]any{
		"items":        map[string]int{"pending": 12, "running": 3, "succeeded": 1841, "dead": len(f.letters)},
		"dead_letters": dl,
	})
}
