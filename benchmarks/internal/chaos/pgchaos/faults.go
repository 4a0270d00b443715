package pgchaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/switchboard-go/switchboard/benchmarks/internal/chaos"
)

// Server is the PostgreSQL a scenario runs on, as its faults reach it.
type Server struct {
	// DB is a pool on the systems' database, for the faults and the Diagnoser; its connections
	// are not the systems', and the backend kill spares them.
	DB *sql.DB
	// AppName is the application_name prefix of the systems' connections: the backends
	// pg-backend-kill terminates.
	AppName string
	// HotTables are the system's tables the readers scan and the Diagnoser measures.
	HotTables []string
	// Stop and Start stop PostgreSQL at once (as a crash would: no checkpoint) and start it
	// again, for postgres-restart; nil leaves that kind without a fault.
	Stop, Start func(ctx context.Context) error
	// Clock is the time of the faults' loops; nil is chaos.RealClock.
	Clock chaos.Clock
}

// Faults returns the faults of the PostgreSQL phase kinds on s.
func (s Server) Faults() map[chaos.Kind]chaos.Fault {
	if s.Clock == nil {
		s.Clock = chaos.RealClock
	}
	f := map[chaos.Kind]chaos.Fault{
		chaos.IdleInTx:       &idleInTx{s: s},
		chaos.ActiveReaders:  &loops{s: s, body: s.read},
		chaos.PGBackendKill:  &loops{s: s, body: s.killBackends},
		chaos.PoolExhaustion: &idleConns{s: s},
	}
	if s.Stop != nil && s.Start != nil {
		f[chaos.PostgresRestart] = &restart{s: s}
	}
	return f
}

// idleInTx holds one transaction with an XID for the phase: the xmin horizon stays where it
// was, so no vacuum reclaims what the system deletes or updates meanwhile.
type idleInTx struct {
	s    Server
	conn *sql.Conn
	tx   *sql.Tx
}

func (f *idleInTx) Start(ctx context.Context, _ chaos.Phase) error {
	conn, err := f.s.DB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("idle-in-tx: %w", err)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err == nil {
		_, err = tx.ExecContext(ctx, "SELECT txid_current()")
	}
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("idle-in-tx: %w", err)
	}
	f.conn, f.tx = conn, tx
	return nil
}

func (f *idleInTx) Stop(context.Context, chaos.Phase) error {
	if f.tx == nil {
		return nil
	}
	err := errors.Join(ignoreDone(f.tx.Rollback()), f.conn.Close())
	f.conn, f.tx = nil, nil
	return err
}

// ignoreDone is err unless it says the transaction had ended already (its connection was cut,
// as a restart in the same scenario cuts it).
func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

// loops runs body in the phase's loops until the phase ends: Readers loops of the readers, one
// loop of the backend kill. A loop's errors are the database's answers to the fault (a
// connection cut by a restart) and do not end it.
type loops struct {
	s      Server
	body   func(ctx context.Context, p chaos.Phase, i int)
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (f *loops) Start(ctx context.Context, p chaos.Phase) error {
	ctx, f.cancel = context.WithCancel(context.WithoutCancel(ctx))
	n := 1
	if p.Kind == chaos.ActiveReaders {
		n = max(p.Readers, 1)
	}
	for i := range n {
		f.wg.Go(func() { f.body(ctx, p, i) })
	}
	return nil
}

func (f *loops) Stop(context.Context, chaos.Phase) error {
	if f.cancel != nil {
		f.cancel()
		f.wg.Wait()
	}
	return nil
}

// readPeriod is how long a reader keeps one REPEATABLE READ transaction open while it scans:
// long enough to hold the horizon as an analytics query does, short enough that a phase sees
// several.
const readPeriod = 10 * time.Second

// read scans the hot tables in REPEATABLE READ transactions, one after the other, until ctx
// ends.
func (s Server) read(ctx context.Context, _ chaos.Phase, _ int) {
	for ctx.Err() == nil {
		tx, err := s.DB.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
		if err != nil {
			s.pause(ctx, time.Second)
			continue
		}
		until := s.Clock.Now().Add(readPeriod)
		for ctx.Err() == nil && s.Clock.Now().Before(until) {
			for _, t := range s.HotTables {
				var n int64
				_ = tx.QueryRowContext(ctx, "SELECT count(*) FROM "+t).Scan(&n)
			}
		}
		_ = tx.Rollback()
	}
}

// killBackends terminates Rate of the systems' backends a second until ctx ends.
func (s Server) killBackends(ctx context.Context, p chaos.Phase, _ int) {
	every := time.Duration(float64(time.Second) / p.Rate)
	for ctx.Err() == nil {
		_, _ = s.DB.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	WHERE datname = current_database() AND application_name LIKE $1 || '%' AND pid <> pg_backend_pid()
	ORDER BY random() LIMIT 1`, s.AppName)
		s.pause(ctx, every)
	}
}

// pause waits d, or until ctx ends.
func (s Server) pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-s.Clock.After(d):
	}
}

// idleConns holds IdleConns connections, idle, for the phase: what is left of max_connections is
// what the systems may open. Server.DB must allow that many open connections (database/sql's
// default: no limit).
type idleConns struct {
	s     Server
	conns []*sql.Conn
}

func (f *idleConns) Start(ctx context.Context, p chaos.Phase) error {
	for range p.IdleConns {
		c, err := f.s.DB.Conn(ctx)
		if err == nil {
			err = c.PingContext(ctx)
		}
		if err != nil {
			// The server refused more: it is exhausted, which is the phase's point.
			if c != nil {
				_ = c.Close()
			}
			break
		}
		f.conns = append(f.conns, c)
	}
	return nil
}

func (f *idleConns) Stop(context.Context, chaos.Phase) error {
	var err error
	for _, c := range f.conns {
		err = errors.Join(err, c.Close())
	}
	f.conns = nil
	return err
}

// restart stops PostgreSQL for half the phase, then starts it.
type restart struct {
	s       Server
	wg      sync.WaitGroup
	started chan error
}

func (f *restart) Start(ctx context.Context, p chaos.Phase) error {
	if err := f.s.Stop(ctx); err != nil {
		return fmt.Errorf("postgres-restart: stop: %w", err)
	}
	f.started = make(chan error, 1)
	f.wg.Go(func() {
		<-f.s.Clock.After(p.Duration / 2)
		f.started <- f.s.Start(context.WithoutCancel(ctx))
	})
	return nil
}

func (f *restart) Stop(context.Context, chaos.Phase) error {
	f.wg.Wait()
	if err := <-f.started; err != nil {
		return fmt.Errorf("postgres-restart: start: %w", err)
	}
	return nil
}
