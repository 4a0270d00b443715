package durable

import (
	"context"
	"fmt"
	"strings"

	"github.com/switchboard-go/switchboard/durable/record"
)

// WithReference gives the item the application's own id for it (an order number, a
// notification id such as "n-00168"), by which an operator finds the item, its attempts and
// its dead letter (Queue.Find, the admin's search) without reading payloads. Unlike a token
// (WithToken) it is not unique: the items of one order may share it. Without it, a request's
// method Reference() string gives it; empty: none. It is UTF-8 without NUL or white space at
// either end, at most 1024 bytes.
func WithReference(ref string) EnqueueOption { return func(c *enqueueConfig) { c.reference = &ref } }

// referenced is a request type that names its own reference (see WithReference).
type referenced interface{ Reference() string }

// itemReference returns the reference of the item of req: WithReference's, else req's own,
// checked.
func (c *enqueueConfig) itemReference(name string, req any) (string, error) {
	ref := ""
	if c.reference != nil {
		ref = *c.reference
	} else if r, ok := req.(referenced); ok {
		ref = r.Reference()
	}
	if strings.TrimSpace(ref) != ref {
		// Kept as given it could not be found by the id an operator types.
		return "", fmt.Errorf("durable: Enqueue %s: the reference %q has leading or trailing white space", name, ref)
	}
	return ref, checkKey(name, "reference", ref)
}

// maxFound bounds the items and the letters Find returns: a text shared by more is a filter's
// job (Items, DeadLetters), not a search's.
const maxFound = 100

// Found is what Find found for a text: the items whose reference, token or dedupe key it is,
// newest first, and the dead letters of those items and of the items that died with it as
// their dedupe key.
type Found struct {
	Items       []record.Item
	DeadLetters []record.DeadLetter
}

// Find returns the items and dead letters the text names: the items whose reference
// (WithReference) or token (WithToken) it is, the item holding it as its dedupe key now (or,
// after success, for its uniqueness window), and the dead letters of those items and of the
// items that died with it as their dedupe key. At most 100 of each, newest first. The text is
// matched whole, case and all: a reference is an id, not words. An empty text, or one no item
// could have, is an error naming it.
func (q *Queue) Find(ctx context.Context, text string) (Found, error) {
	if strings.TrimSpace(text) == "" {
		return Found{}, fmt.Errorf("durable: Find: the text is empty")
	}
	if err := keyProblem("search text", text); err != nil {
		return Found{}, fmt.Errorf("durable: Find: %w", err)
	}
	f, err := finderOf(q.store)
	if err != nil {
		return Found{}, err
	}
	items, letters, err := f.FindItems(ctx, text, maxFound)
	if err != nil {
		return Found{}, err
	}
	out := Found{Items: make([]record.Item, 0, len(items)), DeadLetters: make([]record.DeadLetter, 0, len(letters))}
	for _, it := range items {
		out.Items = append(out.Items, itemOf(it))
	}
	for _, d := range letters {
		out.DeadLetters = append(out.DeadLetters, q.letterOf(d))
	}
	return out, nil
}
