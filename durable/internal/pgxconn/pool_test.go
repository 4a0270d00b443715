package pgxconn

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// A connection refused for lack of slots says so, naming the instance's budget and where to
// read about it; the server's error is still there to match; other errors pass as they are.
func TestExplainRefusal(t *testing.T) {
	full := fmt.Errorf("failed to connect: %w", &pgconn.PgError{Severity: "FATAL", Code: TooManyClients, Message: "sorry, too many clients already"})
	err := ExplainRefusal(full, 6)
	for _, want := range []string{"sorry, too many clients already", "at most 6 (postgres.Config.MaxConns) connections", "max_connections", "TransactionPooling", "How many connections an instance uses"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: want it to say %q", err, want)
		}
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); !ok || pgErr.Code != TooManyClients {
		t.Errorf("the server's error is not matched any more: %v", err)
	}
	if err := ExplainRefusal(full, 0); !strings.Contains(err.Error(), "unbounded") {
		t.Errorf("a pool without a bound: %v", err)
	}
	other := fmt.Errorf("failed to connect: %w", &pgconn.PgError{Severity: "FATAL", Code: "28P01", Message: "password authentication failed"})
	if got := ExplainRefusal(other, 6); got != other {
		t.Errorf("another error was changed: %v", got)
	}
}

// A read into a buffer larger than BigBuffer marks the connection, once: the pool closes it
// when it comes back rather than keep the buffer idle.
func TestBufferWatch(t *testing.T) {
	w := &bufferWatch{Conn: nopConn{}}
	_, _ = w.Read(make([]byte, 8192))
	if w.grown.Load() {
		t.Fatal("an 8 KiB read marked the connection")
	}
	_, _ = w.Read(make([]byte, BigBuffer+1))
	if !w.grown.Swap(false) {
		t.Fatal("a read past BigBuffer did not mark the connection")
	}
}

// nopConn is a net.Conn whose reads read nothing.
type nopConn struct{ net.Conn }

func (nopConn) Read([]byte) (int, error) { return 0, nil }
