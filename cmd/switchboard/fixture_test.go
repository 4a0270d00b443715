package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
	"github.com/switchboard-go/switchboard/durable/postgres"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

const token = "cli-test-token"

type importContact struct {
	mediator.Command
	Email string `json:"email"`
}

// server is a real admin handler over a real durable queue, whose scheduler runs: three failed
// letters of source crm-sync (bob, ann, and one with no email, which fails even once the
// handler is fixed), two pending items due in an hour (later@ and never@), the breakers "payments" and
// "https://billing.example/v1", and the schedule "nightly".
type server struct {
	url     string
	q       *durable.Queue
	reg     *breaker.Registry
	fixed   *atomic.Bool
	letters []record.DeadLetterID
	items   [2]durable.Enqueued
}

// dsnOf returns the database of a test: sqlite:PATH in the test's directory, or with postgres
// a schema of its own on the server of SWITCHBOARD_TEST_PG_DSN (skipping without one, failing
// under CI=true, as the other packages' PostgreSQL tests do).
func dsnOf(t *testing.T, postgres bool) string {
	t.Helper()
	if !postgres {
		return "sqlite:" + filepath.Join(t.TempDir(), "queue.db")
	}
	dsn := os.Getenv(durabletest.PostgresDSNEnv)
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("SWITCHBOARD_TEST_PG_DSN is not set under CI=true")
		}
		t.Skip("SWITCHBOARD_TEST_PG_DSN not set")
	}
	return durabletest.PostgresSchema(t, dsn)
}

func newServer(t *testing.T, postgres bool) *server {
	t.Helper()
	ctx := context.Background()
	dsn := dsnOf(t, postgres)
	// The tool migrates the database, as a deploy step would; the queue then only checks it.
	if r := runCLI(t, nil, "migrate", "up", "--db", dsn); r.code != 0 {
		t.Fatalf("migrate up: %d %s", r.code, r.stderr)
	}
	q, err := durable.Open(ctx, driverOf(dsn), durable.Config{SkipMigrations: true, Logger: zap.NewNop(), PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	durable.Register[*importContact](q, "crm.import-contact")
	fixed := new(atomic.Bool)
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, r *importContact) (mediator.Void, error) {
		if !fixed.Load() || r.Email == "" {
			return mediator.Void{}, errors.New("invalid email " + r.Email)
		}
		return mediator.Void{}, nil
	})
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	res, err := q.RunBatch(ctx, m, "crm-sync", []durable.BatchItem{
		{Key: "c1", Request: &importContact{Email: "bob@example"}},
		{Key: "c2", Request: &importContact{Email: "ann@example"}},
		{Key: "c3", Request: &importContact{}},
	})
	if err != nil || len(res.DeadLetters) != 3 {
		t.Fatalf("RunBatch = %+v, %v", res, err)
	}
	var items [2]durable.Enqueued
	for i, email := range []string{"later@example", "never@example"} {
		// The application's id of each: "contact/later@example" finds it (items find).
		if items[i], err = q.Enqueue(ctx, &importContact{Email: email}, durable.WithDelay(time.Hour), durable.WithReference("contact/"+email)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.AddSchedule(ctx, durable.ScheduleSpec{Name: "nightly", Spec: "0 3 * * *", Request: "crm.import-contact",
		Payload: []byte(`{"email":"nightly@example"}`)}, "test"); err != nil {
		t.Fatal(err)
	}
	reg := breaker.NewRegistry(breaker.Config{})
	reg.Declare("payments", "https://billing.example/v1")
	h, err := admin.New(admin.Config{Breakers: reg, Queue: q, Sender: m, Token: token, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(m); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = q.Shutdown(ctx)
	})
	return &server{url: srv.URL, q: q, reg: reg, fixed: fixed, letters: res.DeadLetters, items: items}
}

// driverOf returns the queue's driver of a test's dsn.
func driverOf(dsn string) durable.Driver {
	if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		return sqlite.Open(path)
	}
	return postgres.Open(dsn, postgres.Config{})
}

// result is what a run of the tool printed and its exit status.
type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the tool with args and the environment's SWITCHBOARD_* variables of env (none
// from the test's own environment).
func runCLI(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SWITCHBOARD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running %v: %v", args, err)
	}
	return r
}

// cli runs the tool against the server with its token.
func (s *server) cli(t *testing.T, args ...string) result {
	t.Helper()
	return runCLI(t, map[string]string{"SWITCHBOARD_URL": s.url, "SWITCHBOARD_TOKEN": token}, args...)
}

// jsonOf runs the tool with --json, wants exit status 0 and returns its output parsed.
func (s *server) jsonOf(t *testing.T, args ...string) map[string]any {
	t.Helper()
	r := s.cli(t, append(args, "--json")...)
	if r.code != 0 {
		t.Fatalf("%v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("%v --json printed %q: %v", args, r.stdout, err)
	}
	return v
}
