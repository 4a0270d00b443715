package pgxconn_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable/internal/pgtest"
	"github.com/switchboard-go/switchboard/durable/internal/pgxconn"
)

// cancelRequestCode opens a CancelRequest packet (PostgreSQL's protocol): a connection that
// asks the server to cancel another's statement, and closes.
const cancelRequestCode = 80877102

// slowCancelProxy forwards TCP connections to upstream, holding those that carry a
// CancelRequest for delay before it forwards them: a server slow to take a cancel request, as
// a busy one is.
type slowCancelProxy struct {
	ln       net.Listener
	upstream string
	delay    time.Duration
	cancels  atomic.Int64 // the cancel requests it forwarded
	done     chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

func startSlowCancelProxy(t *testing.T, upstream string, delay time.Duration) *slowCancelProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &slowCancelProxy{ln: ln, upstream: upstream, delay: delay, done: make(chan struct{})}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.track(c)
			p.wg.Go(func() { p.forward(c) })
		}
	})
	t.Cleanup(func() {
		close(p.done)
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *slowCancelProxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, c)
}

func (p *slowCancelProxy) forward(client net.Conn) {
	defer client.Close()
	var head [8]byte // a startup packet's length and code
	if _, err := io.ReadFull(client, head[:]); err != nil {
		return
	}
	if binary.BigEndian.Uint32(head[4:]) == cancelRequestCode {
		p.cancels.Add(1)
		select {
		case <-time.After(p.delay): // the busy server, slow to take the cancel request
		case <-p.done:
			return
		}
	}
	server, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	p.track(server)
	defer server.Close()
	if _, err := server.Write(head[:]); err != nil {
		return
	}
	var both sync.WaitGroup
	both.Go(func() {
		_, _ = io.Copy(server, client)
		_ = server.Close()
	})
	_, _ = io.Copy(client, server)
	_ = client.Close()
	both.Wait()
}

// A connection whose statement outlived its caller's context is closed by pgx in the
// background (a cancel request, then Terminate; up to 15 s on a slow server), and database/sql
// counts it closed at once: the pool must not open another in its place before that socket is
// closed, or an instance holds more than its budget on the server (and a server filled to its
// max_connections by budgets refuses the new one). Here the server takes 3 s to get the cancel
// request: a pool of one connection, asked for a statement at once after another timed out,
// waits for the first connection to close, and the server never sees two of its connections.
func TestPoolCountsAConnectionUntilItsSocketCloses(t *testing.T) {
	dsn := pgtest.DSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgtest.DSNEnv)
	}
	const delay = 3 * time.Second
	proxy, target, app := proxied(t, dsn, delay)
	db, err := pgxconn.OpenPool(target, pgxconn.Pool{MaxConns: 1, MaxIdleConns: 1, IdleTime: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	admin := pgtest.Open(t, dsn)
	backends := func() int {
		var n int
		if err := admin.QueryRowContext(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// The pool's one connection is opened first: under load a dial alone can take longer than
	// the statement's 200 ms, and a statement whose context ends while it dials sends no query
	// to cancel.
	if err := db.PingContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err = db.ExecContext(ctx, "SELECT pg_sleep(10)")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the statement that outlives its context: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 2*delay)
	defer cancel()
	began := time.Now()
	if _, err := db.ExecContext(ctx, "SELECT 1"); err != nil {
		t.Fatalf("the next statement: %v", err)
	}
	took := time.Since(began)
	// The first connection's backend ends as its socket closes; give it a moment to go from
	// pg_stat_activity, far less than the cancel request's delay.
	n := backends()
	for deadline := time.Now().Add(500 * time.Millisecond); n > 1 && time.Now().Before(deadline); n = backends() {
		time.Sleep(10 * time.Millisecond) // polling pg_stat_activity, with a deadline
	}
	if n > 1 {
		t.Fatalf("a pool of 1 connection holds %d on the server after its next statement (which took %v): it opened another while the first, which pgx closes in the background, still ran", n, took.Round(time.Millisecond))
	}
	t.Logf("the next statement waited %v for the first connection to close", took.Round(time.Millisecond))
	if proxy.cancels.Load() != 1 {
		t.Errorf("%d cancel requests, want 1: directly, a statement that outlives its context is cancelled", proxy.cancels.Load())
	}
}

// proxied starts a slowCancelProxy (of delay) in front of the server of dsn, a URL, and returns
// it, dsn through it, and the application_name, of the test's own, that target sets.
func proxied(t *testing.T, dsn string, delay time.Duration) (proxy *slowCancelProxy, target, app string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("the test DSN must be a URL: %v", err)
	}
	proxy = startSlowCancelProxy(t, u.Host, delay)
	var b [6]byte
	_, _ = rand.Read(b[:])
	app = "pgxconn-" + hex.EncodeToString(b[:])
	u.Host = proxy.ln.Addr().String()
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return proxy, u.String(), app
}
