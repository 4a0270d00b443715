package admin

import (
	"net/http"

	"github.com/switchboard-go/switchboard/behaviors/budget"
)

// Budgets is what the retry-budget route calls of a retry budget; a *budget.Budget is one.
type Budgets interface {
	Snapshot() []budget.Usage
}

var _ Budgets = (*budget.Budget)(nil)

// budgetBody is one key of a retry budget in the API: its counts over the budget's window.
type budgetBody struct {
	Key     string  `json:"key"`
	Calls   int     `json:"calls"`
	Retries int     `json:"retries"`
	Refused int     `json:"refused"`
	Allowed float64 `json:"allowed"`
}

// listBudgets answers GET /api/retry-budgets: every key of Config.Budgets with its calls,
// retries allowed and retries refused over the window, and the retries the window allows.
func (s *server) listBudgets(w http.ResponseWriter, r *http.Request, _ string) {
	if s.cfg.Budgets == nil {
		writeError(w, http.StatusNotFound, "no retry budget is configured")
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	us := s.cfg.Budgets.Snapshot()
	out := make([]budgetBody, 0, len(us))
	for _, u := range us {
		out = append(out, budgetBody{Key: u.Key, Calls: u.Calls, Retries: u.Retries, Refused: u.Refused, Allowed: u.Allowed})
	}
	writeJSON(w, http.StatusOK, struct {
		Budgets []budgetBody `json:"budgets"`
	}{out})
}
