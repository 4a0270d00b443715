package durable

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/switchboard-go/switchboard/durable/record"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// WithToken gives the item token as its identity, not a random one: while an item holding it is
// kept, an enqueue with it inserts nothing and reports that item (Duplicate). Derive it from the
// request's source (an event's id), so a retry after ErrOutcomeUnknown or a crash stores it once.
// It is non-empty UTF-8 without NUL, at most MaxTokenBytes: what PostgreSQL stores.
func WithToken(token string) EnqueueOption { return func(c *enqueueConfig) { c.token = &token } }

// itemToken returns the token WithToken gave, checked, or a new random one.
func (c *enqueueConfig) itemToken() (string, error) {
	if c.token == nil {
		return newToken(), nil
	}
	switch t := *c.token; {
	case t == "":
		return "", errors.New("durable: WithToken: the token is empty")
	case len(t) > MaxTokenBytes:
		return "", fmt.Errorf("durable: WithToken: the token is %d bytes long, more than MaxTokenBytes (%d)", len(t), MaxTokenBytes)
	case !utf8.ValidString(t):
		return "", fmt.Errorf("durable: WithToken: the token %q is not valid UTF-8", t)
	case strings.IndexByte(t, 0) >= 0:
		return "", fmt.Errorf("durable: WithToken: the token %q holds a NUL byte", t)
	default:
		return t, nil
	}
}

// newToken returns a new token: 128 bits in hex, the time in milliseconds (48 bits) then 80
// random bits, so that no two items made anywhere get the same one and tokens made one after
// another sort one after another: each insert adds to the end of the token index, as it does
// to the primary key, rather than to a random page of it (which costs a page write per commit
// on SQLite and scatters PostgreSQL's cache).
func newToken() string {
	var b [16]byte
	ms := uint64(time.Now().UnixMilli())
	for i := range 6 {
		b[i] = byte(ms >> (40 - 8*i))
	}
	_, _ = rand.Read(b[6:]) // crypto/rand.Read does not fail: it crashes the program instead
	var h [32]byte
	hex.Encode(h[:], b[:])
	return string(h[:])
}

// ItemByToken returns the item holding token (see WithToken); a *NotFoundError (ErrNotFound)
// if there is none.
func (q *Queue) ItemByToken(ctx context.Context, token string) (record.Item, error) {
	it, err := q.store.ItemByToken(ctx, token)
	if err != nil {
		return record.Item{}, notFoundOf(err, "item token", strconv.Quote(token))
	}
	return itemOf(it), nil
}
