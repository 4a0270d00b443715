package admin

import (
	"net/http"

	"github.com/switchboard-go/switchboard/behaviors/hedge"
)

// Hedges is what GET /api/hedges reads of a hedging behavior; a *hedge.Behavior is one. The
// route answers 404 when Config.Hedges is nil.
type Hedges interface {
	Snapshot() []hedge.Tally
}

var _ Hedges = (*hedge.Behavior)(nil)

// hedgeBody is one key of a hedging behavior in the API.
type hedgeBody struct {
	// Behavior names the hedging behavior: DefaultName for Config.Hedges, else its name in
	// Config.HedgeBehaviors.
	Behavior string  `json:"behavior"`
	Key      string  `json:"key"`
	Calls    uint64  `json:"calls"`
	Sent     uint64  `json:"hedges_sent"`
	Won      uint64  `json:"hedges_won"`
	Refused  uint64  `json:"hedges_refused"`
	DelayMS  float64 `json:"delay_ms"`
	Samples  int     `json:"samples"`
}

func (s *server) listHedges(w http.ResponseWriter, r *http.Request, _ string) {
	behaviors := s.hedgeBehaviors()
	if len(behaviors) == 0 {
		writeError(w, http.StatusNotFound, "no hedging behavior is configured")
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	out := []hedgeBody{}
	for _, b := range behaviors {
		for _, t := range b.v.Snapshot() {
			out = append(out, hedgeBody{Behavior: b.name, Key: t.Key, Calls: t.Calls, Sent: t.Sent, Won: t.Won, Refused: t.Refused,
				DelayMS: float64(t.Delay.Microseconds()) / 1000, Samples: t.Samples})
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Hedges []hedgeBody `json:"hedges"`
	}{out})
}
