package pgxconn

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// Pool is how OpenPool sets up a pool.
type Pool struct {
	// MaxConns bounds the connections open at once (database/sql's SetMaxOpenConns): a call
	// that finds them all busy waits for one, within its context.
	MaxConns int
	// MaxIdleConns is how many connections stay open between calls.
	MaxIdleConns int
	// IdleTime closes a connection idle for this long.
	IdleTime time.Duration
	// NoSessionState sends every statement unprepared (pgx's QueryExecModeExec: one round trip,
	// no statement kept on the connection), for a pooler in transaction mode, which gives each
	// transaction whichever server connection is free.
	NoSessionState bool
	// ApplicationName, when not empty and the DSN names none, is the connections'
	// application_name (pg_stat_activity).
	ApplicationName string
}

// BigBuffer is the size of read buffer past which a connection is closed when it goes back to
// the pool: pgx keeps the buffer it grew for the largest message it read (a large payload)
// until its next read, so an idle connection would pin that memory for as long as it idles.
// A dial costs less than reading such a row.
const BigBuffer = 256 << 10

// TooManyClients is PostgreSQL's SQLSTATE for a connection refused for lack of slots.
const TooManyClients = "53300"

// ReadOnlyTransaction is PostgreSQL's SQLSTATE for a write refused by a server that takes no
// writes: a standby, or a primary fenced with default_transaction_read_only before a
// switchover.
const ReadOnlyTransaction = "25006"

// ReadOnly reports whether err is a write refused by a server that takes none
// (ReadOnlyTransaction).
func ReadOnly(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pgErr.Code == ReadOnlyTransaction
}

// OpenPool opens a database/sql pool of pgx connections on dsn set up by p. Its connections
// that read a message larger than BigBuffer are closed, not kept idle, when they go back to
// the pool; a connection the server refused for lack of slots fails with an error that names
// the instance's budget (p.MaxConns) and where to read about it. A connection whose server
// refused a write as read-only (ReadOnlyTransaction) is closed when it goes back to the pool,
// so that the next one is dialled anew: after a switchover that fenced the old primary, a
// multi-host DSN with target_session_attrs=read-write then reaches the new primary, where a
// kept connection would refuse every write until it idled out.
func OpenPool(dsn string, p Pool) (*sql.DB, error) {
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	if p.NoSessionState {
		cc.DefaultQueryExecMode = pgx.QueryExecModeExec
		cc.StatementCacheCapacity, cc.DescriptionCacheCapacity = 0, 0
	}
	if _, ok := cc.RuntimeParams["application_name"]; !ok && p.ApplicationName != "" {
		cc.RuntimeParams["application_name"] = p.ApplicationName
	}
	if _, ok := cc.RuntimeParams["jit"]; !ok && !p.NoSessionState {
		// The queue's statements are short, but the planner's estimate of a claim with a
		// limit it cannot fold (a share per fairness key) grows with the table; past
		// jit_above_cost it compiles the plan on every execution: a claim of 32 items took
		// 1.7 s at a million pending items with JIT, 0.9 ms without (BenchmarkClaimDepth).
		// A pooler in transaction mode refuses startup parameters it does not know: there the
		// server's or the role's setting decides (docs/durable.md).
		cc.RuntimeParams["jit"] = "off"
	}
	onErr := cc.OnPgError
	cc.OnPgError = func(pc *pgconn.PgConn, pgErr *pgconn.PgError) bool {
		if w, ok := pc.Conn().(*bufferWatch); ok && pgErr.Code == ReadOnlyTransaction {
			w.readOnly.Store(true)
		}
		if onErr != nil {
			return onErr(pc, pgErr) // pgx's own closes the connection on a FATAL
		}
		return !strings.EqualFold(pgErr.Severity, "FATAL")
	}
	after := cc.AfterNetConnect
	cc.AfterNetConnect = func(ctx context.Context, c *pgconn.Config, nc net.Conn) (net.Conn, error) {
		if after != nil {
			var err error
			if nc, err = after(ctx, c, nc); err != nil {
				return nil, err
			}
		}
		w := &bufferWatch{Conn: nc}
		if s, ok := ctx.Value(slotKey{}).(*slot); ok {
			s.hold(w)
		}
		return w, nil
	}
	cn := &connector{Connector: stdlib.GetConnector(*cc), budget: p.MaxConns}
	if p.MaxConns > 0 {
		cn.sockets = make(chan struct{}, p.MaxConns)
	}
	db := sql.OpenDB(cn)
	db.SetMaxOpenConns(p.MaxConns)
	db.SetMaxIdleConns(p.MaxIdleConns)
	db.SetConnMaxIdleTime(p.IdleTime)
	return db, nil
}

// connector makes the pool's connections (see OpenPool).
type connector struct {
	driver.Connector
	budget int
	// sockets holds a token per socket open, from the dial until it is closed: database/sql
	// counts a connection it discards as closed at once, while pgx may still be closing its
	// socket (it cancels the statement under way and reads what the server still sends, for
	// up to 15 s), and the server counts the socket until then. Connect waits for a token, so
	// the sockets open never outnumber the budget. Nil: no budget.
	sockets chan struct{}
}

// slotKey is the context key under which Connect hands its token to AfterNetConnect.
type slotKey struct{}

// slot is one token of connector.sockets, given back once: by the socket's Close, or by
// Connect when no socket holds it.
type slot struct {
	sockets chan struct{}
	mu      sync.Mutex
	owner   *bufferWatch // the socket holding the token (the last dialled, with fallback hosts)
	freed   bool
}

// hold makes w the token's holder.
func (s *slot) hold(w *bufferWatch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owner = w
	w.slot = s
}

// release gives the token back when by (nil: Connect) is its holder; it does so once.
func (s *slot) release(by *bufferWatch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.freed || s.owner != by {
		return
	}
	s.freed = true
	<-s.sockets
}

// Connect opens a connection once fewer sockets than the budget are open, naming the budget
// when the server has no slot left.
func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	var s *slot
	if c.sockets != nil {
		select {
		case c.sockets <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s = &slot{sockets: c.sockets}
		ctx = context.WithValue(ctx, slotKey{}, s)
	}
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		if s != nil {
			s.mu.Lock()
			s.owner = nil // a socket that failed to connect is closed by now
			s.mu.Unlock()
			s.release(nil)
		}
		return nil, ExplainRefusal(err, c.budget)
	}
	sc, ok := dc.(*stdlib.Conn)
	if !ok {
		return dc, nil
	}
	return &pooled{stdConn: sc}, nil
}

// ExplainRefusal returns err, the error of a connection attempt, with the instance's budget
// and where to read about it when the server refused the connection for lack of slots; any
// other error as it is.
func ExplainRefusal(err error, budget int) error {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); !ok || pgErr.Code != TooManyClients {
		return err
	}
	limit := "unbounded (a pool given to postgres.New without SetMaxOpenConns)"
	if budget > 0 {
		limit = fmt.Sprintf("%d (postgres.Config.MaxConns)", budget)
	}
	return fmt.Errorf("%w: the database has no connection slot left; this instance holds at most %s connections, and the instances sharing the database must hold fewer than its max_connections less its reserved slots together: lower MaxConns, raise max_connections or put PgBouncer in front (postgres.Config.TransactionPooling); see \"How many connections an instance uses\" in docs/durable.md", err, limit)
}

// stdConn names stdlib.Conn for embedding: the field's name is not Conn, so the method Conn
// (the *pgx.Conn) is promoted with the others.
type stdConn = stdlib.Conn

// pooled is a connection of an OpenPool pool: stdlib's, which database/sql asks whether to keep
// when it goes back to the pool.
type pooled struct{ *stdConn }

// IsValid reports whether the pool may keep the connection: not when it grew its read buffer
// past BigBuffer since it was last asked, nor once its server refused a write as read-only
// (driver.Validator).
func (c *pooled) IsValid() bool {
	if c.Conn().IsClosed() {
		return false
	}
	w, ok := c.Conn().PgConn().Conn().(*bufferWatch)
	return !ok || !w.grown.Swap(false) && !w.readOnly.Load()
}

// bufferWatch is a connection's socket, which notes a read into a buffer larger than BigBuffer
// (and a write its server refused as read-only) and gives back its budget token when closed.
type bufferWatch struct {
	net.Conn
	grown    atomic.Bool
	readOnly atomic.Bool // the server refused a write as read-only (ReadOnlyTransaction)
	slot     *slot
}

// Close closes the socket and gives back its token.
func (w *bufferWatch) Close() error {
	err := w.Conn.Close()
	if w.slot != nil {
		w.slot.release(w)
	}
	return err
}

// Read reads into p, noting a large p: the read buffer pgx grew for a large message.
func (w *bufferWatch) Read(p []byte) (int, error) {
	if len(p) > BigBuffer {
		w.grown.Store(true)
	}
	return w.Conn.Read(p)
}
