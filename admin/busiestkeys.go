package admin

import (
	"net/http"

	"github.com/switchboard-go/switchboard/durable"
)

// BusiestKeys is what the busiest keys route calls of the queue; a *durable.Queue is one. The
// route answers 404 when Config.Queue is not one.
type BusiestKeys interface {
	BusiestKeys(n int) durable.KeyShares
}

var _ BusiestKeys = (*durable.Queue)(nil)

const noBusiestKeys = "the configured queue does not count its claims by key (it is not an admin.BusiestKeys, such as a *durable.Queue)"

type keyShareBody struct {
	Key    string  `json:"key"`
	Claims int     `json:"claims"`
	Share  float64 `json:"share"`
}

// listBusiestKeys answers GET /api/busiest-keys: this instance's claims of the last minutes by
// fairness key, the busiest first (limit, 1 to 100, default 10).
func (s *server) listBusiestKeys(w http.ResponseWriter, r *http.Request, _ string, q BusiestKeys) {
	v, ok := query(w, r, "limit")
	if !ok {
		return
	}
	limit, err := intParam(v, "limit", 1, 100)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	shares := q.BusiestKeys(limit)
	keys := make([]keyShareBody, 0, len(shares.Keys))
	for _, k := range shares.Keys {
		keys = append(keys, keyShareBody{Key: k.Key, Claims: k.Claims, Share: k.Share})
	}
	writeJSON(w, http.StatusOK, struct {
		WindowSeconds float64        `json:"window_seconds"`
		Total         int            `json:"total"`
		Others        int            `json:"others"`
		Keys          []keyShareBody `json:"keys"`
	}{shares.Window.Seconds(), shares.Total, shares.Others, keys})
}
