package admin

import (
	"math"
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
	// Budget names the retry budget: DefaultName for Config.Budgets, else its name in
	// Config.RetryBudgets.
	Budget  string `json:"budget"`
	Key     string `json:"key"`
	Calls   int    `json:"calls"`
	Retries int    `json:"retries"`
	Refused int    `json:"refused"`
	Allowed int64  `json:"allowed"` // the whole retries the window allows (budget.Usage.Allowed, rounded down)
}

// listBudgets answers GET /api/retry-budgets: every key of every retry budget with its calls,
// retries allowed and retries refused over the window, and the retries the window allows.
func (s *server) listBudgets(w http.ResponseWriter, r *http.Request, _ string) {
	budgets := s.retryBudgets()
	if len(budgets) == 0 {
		writeError(w, http.StatusNotFound, "no retry budget is configured")
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	out := []budgetBody{}
	for _, b := range budgets {
		for _, u := range b.v.Snapshot() {
			out = append(out, budgetBody{Budget: b.name, Key: u.Key, Calls: u.Calls, Retries: u.Retries, Refused: u.Refused, Allowed: int64(math.Floor(u.Allowed))})
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Budgets []budgetBody `json:"budgets"`
	}{out})
}
