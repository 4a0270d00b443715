package admin

import (
	"context"
	"net/http"
	"strings"

	"github.com/switchboard-go/switchboard/durable"
)

// Finder is what GET /api/find calls of a queue; a *durable.Queue is one. A queue without it
// answers 404.
type Finder interface {
	Find(ctx context.Context, text string) (durable.Found, error)
}

var _ Finder = (*durable.Queue)(nil)

const noFind = "the configured queue cannot find items (it has no Find method, as a *durable.Queue has)"

// find answers GET /api/find?q=: the items whose reference, token or dedupe key q is, and
// their dead letters (durable.Queue.Find), newest first.
func (s *server) find(w http.ResponseWriter, r *http.Request, _ string, f Finder) {
	q, ok := query(w, r, "q")
	if !ok {
		return
	}
	text := q.Get("q")
	if strings.TrimSpace(text) == "" {
		writeError(w, http.StatusBadRequest, "q is required: an item's reference, token or dedupe key")
		return
	}
	if err := badText("q", text); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	found, err := f.Find(r.Context(), text)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	items := make([]itemBody, 0, len(found.Items))
	for _, it := range found.Items {
		items = append(items, itemBodyOf(it))
	}
	letters := make([]deadLetterBody, 0, len(found.DeadLetters))
	for _, d := range found.DeadLetters {
		letters = append(letters, deadLetterOf(d))
	}
	writeJSON(w, http.StatusOK, struct {
		Items       []itemBody       `json:"items"`
		DeadLetters []deadLetterBody `json:"dead_letters"`
	}{items, letters})
}
