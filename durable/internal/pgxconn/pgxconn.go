package pgxconn

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	// Registers the "pgx" database/sql driver.
	"github.com/jackc/pgx/v5/stdlib"
)

// DriverName is the database/sql driver name pgx registers.
const DriverName = "pgx"

// Open opens a database/sql pool with the pgx driver (dsn in any form pgx accepts).
func Open(dsn string) (*sql.DB, error) { return sql.Open(DriverName, dsn) }

// NotApplied reports an error pgx raised before sending anything (it says so: SafeToRetry), a
// failed connect, or an ERROR the server answered the statement with (the statement, or its
// transaction, is rolled back). A FATAL or PANIC ends the session, possibly after the commit;
// a deadline or a broken connection after the statement went out leaves it unknown.
func NotApplied(err error) bool {
	if pgconn.SafeToRetry(err) {
		return true
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		sev := pgErr.SeverityUnlocalized
		if sev == "" {
			sev = pgErr.Severity
		}
		return sev == "ERROR"
	}
	_, ok := errors.AsType[*pgconn.ConnectError](err)
	return ok
}

// pgxConn is a connection of a pgx database/sql pool: stdlib's, or OpenPool's around it.
type pgxConn interface{ Conn() *pgx.Conn }

// Query is one statement of a batch: the same unnamed type as the store's BatchQuery, so that
// SendBatch is the store's PostgresDriver.SendBatch.
type Query = struct {
	SQL  string
	Args []any
}

// Rows is what reading a result needs (the store's RowReader).
type Rows = interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// SendBatch sends qs as one pgx batch on conn, a connection of a pgx database/sql pool: one
// round trip and (before the batch's single Sync) one implicit transaction. read[i] reads the
// rows of qs[i]; the first error ends the batch.
func SendBatch(ctx context.Context, conn *sql.Conn, qs []Query, read []func(Rows) error) error {
	return conn.Raw(func(dc any) error {
		pc, ok := dc.(pgxConn)
		if !ok {
			return fmt.Errorf("the database/sql driver is %T, not pgx", dc)
		}
		b := &pgx.Batch{}
		for _, q := range qs {
			b.Queue(q.SQL, q.Args...)
		}
		br := pc.Conn().SendBatch(ctx, b)
		defer br.Close()
		for i := range qs {
			rows, err := br.Query()
			if err != nil {
				return err
			}
			err = read[i](rows)
			rows.Close()
			if err != nil {
				return err
			}
		}
		return br.Close()
	})
}

// IsPgx reports whether db is a pool of pgx's database/sql driver.
func IsPgx(db *sql.DB) bool {
	_, ok := db.Driver().(*stdlib.Driver)
	return ok
}

// Listen runs LISTEN for each of channels on conn, a connection of a pgx database/sql pool,
// calls listening once it listens, then notified with the channel and payload of each
// notification on them, until ctx ends or the connection fails. It returns the error that
// ended it (ctx's when ctx ended); the connection is then discarded, not returned to the pool,
// since it may still listen or have been cut in the middle of a message.
func Listen(ctx context.Context, conn *sql.Conn, channels []string, listening func(), notified func(channel, payload string)) error {
	var ended error
	err := conn.Raw(func(dc any) error {
		pc, ok := dc.(pgxConn)
		if !ok {
			ended = fmt.Errorf("the database/sql driver is %T, not pgx", dc)
			return ended
		}
		c := pc.Conn()
		for _, ch := range channels {
			if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
				ended = err
				return driver.ErrBadConn
			}
		}
		listening()
		for {
			n, err := c.WaitForNotification(ctx)
			if err != nil {
				ended = err
				if ctx.Err() != nil {
					ended = ctx.Err()
				}
				return driver.ErrBadConn
			}
			notified(n.Channel, n.Payload)
		}
	})
	if ended != nil {
		return ended
	}
	return err
}
