package pgxconn

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
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

// OpenPool opens a database/sql pool of pgx connections on dsn set up by p. Its connections
// that read a message larger than BigBuffer are closed, not kept idle, when they go back to
// the pool; a connection the server refused for lack of slots fails with an error that names
// the instance's budget (p.MaxConns) and where to read about it.
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
	after := cc.AfterNetConnect
	cc.AfterNetConnect = func(ctx context.Context, c *pgconn.Config, nc net.Conn) (net.Conn, error) {
		if after != nil {
			var err error
			if nc, err = after(ctx, c, nc); err != nil {
				return nil, err
			}
		}
		s, _ := ctx.Value(slotKey{}).(*slot)
		s.hold()
		return &bufferWatch{Conn: nc, slot: s}, nil
	}
	conn := connector{Connector: stdlib.GetConnector(*cc), budget: p.MaxConns}
	if p.MaxConns > 0 {
		conn.slots = make(chan struct{}, p.MaxConns)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(p.MaxConns)
	db.SetMaxIdleConns(p.MaxIdleConns)
	db.SetConnMaxIdleTime(p.IdleTime)
	return db, nil
}

// connector makes the pool's connections (see OpenPool).
type connector struct {
	driver.Connector
	budget int
	// slots holds a token for each connection whose socket is open or opening, up to budget;
	// nil: unbounded. database/sql counts a connection closed as soon as the driver's Close
	// returns, but pgx closes one whose statement outlived its context in the background (a
	// cancel request, then Terminate: up to 15 s on a slow server), while its server process
	// still holds a connection slot: the pool opens no other in its place until that socket
	// is closed, so that the server never sees more than budget connections of the pool.
	slots chan struct{}
}

// Connect opens a connection once a slot of the budget is free (waiting within ctx for a
// connection that is still closing), naming the budget when the server has no slot left.
func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	s := &slot{slots: c.slots}
	if c.slots != nil {
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for a connection of the pool's %d (postgres.Config.MaxConns) to finish closing: %w", c.budget, ctx.Err())
		}
		s.holders = 1 // the connection attempt's, until it returns
	}
	dc, err := c.Connector.Connect(context.WithValue(ctx, slotKey{}, s))
	s.release() // the attempt's hold: the socket, if it was opened and is still open, holds its own
	if err != nil {
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
// past BigBuffer since it was last asked (driver.Validator).
func (c *pooled) IsValid() bool {
	if c.Conn().IsClosed() {
		return false
	}
	w, ok := c.Conn().PgConn().Conn().(*bufferWatch)
	return !ok || !w.grown.Swap(false)
}

// slotKey is the context key under which Connect passes its slot to the socket it opens.
type slotKey struct{}

// slot is one token of a connector's slots, held by the connection attempt that took it and by
// the sockets it opened (pgx may try several hosts), and given back when the last lets go.
type slot struct {
	slots   chan struct{} // nil: the pool is unbounded, nothing to give back
	mu      sync.Mutex
	holders int
}

// hold adds a holder: a socket the attempt opened, until it is closed.
func (s *slot) hold() {
	if s == nil || s.slots == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holders++
}

// release lets go of one hold, giving the token back after the last.
func (s *slot) release() {
	if s == nil || s.slots == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holders == 0 {
		return
	}
	if s.holders--; s.holders == 0 {
		<-s.slots
	}
}

// bufferWatch is a connection's socket, which notes a read into a buffer larger than BigBuffer,
// and holds its slot of the pool's budget until it is closed.
type bufferWatch struct {
	net.Conn
	grown  atomic.Bool
	slot   *slot
	closed sync.Once
}

// Close closes the socket and gives its slot back (once, however often pgx closes it).
func (w *bufferWatch) Close() error {
	err := w.Conn.Close()
	w.closed.Do(w.slot.release)
	return err
}

// Read reads into p, noting a large p: the read buffer pgx grew for a large message.
func (w *bufferWatch) Read(p []byte) (int, error) {
	if len(p) > BigBuffer {
		w.grown.Store(true)
	}
	return w.Conn.Read(p)
}
