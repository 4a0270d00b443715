package main

import "time"

// The answers of the admin API the tables are made from: the fields the tool shows, named as
// docs/operations.md lists them. --json prints the answers whole.

type queueStats struct {
	Items struct {
		Pending   int64 `json:"pending"`
		Running   int64 `json:"running"`
		Succeeded int64 `json:"succeeded"`
		Dead      int64 `json:"dead"`
		Cancelled int64 `json:"cancelled"`
	} `json:"items"`
	DeadLetters struct {
		Failed    int `json:"failed"`
		Replayed  int `json:"replayed"`
		Discarded int `json:"discarded"`
	} `json:"dead_letters"`
}

type item struct {
	ID          int64      `json:"id"`
	Name        string     `json:"name"`
	State       string     `json:"state"`
	Attempts    int        `json:"attempts"`
	ParkedKey   string     `json:"parked_key"`
	DedupeKey   string     `json:"dedupe_key"`
	DebounceKey string     `json:"debounce_key"`
	OrderingKey string     `json:"ordering_key"`
	BreakerKey  string     `json:"breaker_key"`
	Reference   string     `json:"reference"`
	FairnessKey string     `json:"fairness_key"`
	Priority    int        `json:"priority"`
	NextAt      *time.Time `json:"next_at"`
	LeaseOwner  string     `json:"lease_owner"`
	LeaseUntil  *time.Time `json:"lease_until"`
	LastError   string     `json:"last_error"`
	Deadline    *time.Time `json:"deadline"`
	CreatedAt   *time.Time `json:"created_at"`
	UpdatedAt   *time.Time `json:"updated_at"`
}

type attempt struct {
	Number    int        `json:"number"`
	Instance  string     `json:"instance"`
	StartedAt *time.Time `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
	Outcome   string     `json:"outcome"`
	Error     string     `json:"error"`
}

// itemResult is the answer of a cancel or a run-now, a success's and a conflict's alike.
type itemResult struct {
	ID     int64  `json:"id"`
	Result string `json:"result"`
	State  string `json:"state"`
	Error  string `json:"error"`
}

type deadLetter struct {
	ID         int64      `json:"id"`
	ItemID     int64      `json:"item_id"`
	Source     string     `json:"source"`
	Name       string     `json:"name"`
	Key        string     `json:"key"`
	Error      string     `json:"error"`
	Cause      string     `json:"cause"`
	Status     string     `json:"status"`
	RetryCount int        `json:"retry_count"`
	CreatedAt  *time.Time `json:"created_at"`
	UpdatedAt  *time.Time `json:"updated_at"`
}

type timelineEntry struct {
	Kind       string     `json:"kind"`
	Number     int        `json:"number"`
	StartedAt  *time.Time `json:"started_at"`
	EndedAt    *time.Time `json:"ended_at"`
	Instance   string     `json:"instance"`
	Actor      string     `json:"actor"`
	Outcome    string     `json:"outcome"`
	Error      string     `json:"error"`
	Reason     string     `json:"reason"`
	BulkAction int64      `json:"bulk_action"`
}

// letterFilter is the filter of a listing and of a bulk action.
type letterFilter struct {
	Status string `json:"status,omitempty"`
	Source string `json:"source,omitempty"`
	From   string `json:"from,omitempty"`
	To     string `json:"to,omitempty"`
	Error  string `json:"error,omitempty"`
}

type bulkAction struct {
	ID           int64        `json:"id"`
	Kind         string       `json:"kind"`
	Filter       letterFilter `json:"filter"`
	Reason       string       `json:"reason"`
	Actor        string       `json:"actor"`
	State        string       `json:"state"`
	Rate         float64      `json:"rate"`
	MaxInFlight  int          `json:"max_in_flight"`
	ResetBreaker string       `json:"reset_breaker"`
	Matched      int64        `json:"matched"`
	Settled      int64        `json:"settled"`
	Totals       struct {
		Replayed    int64 `json:"replayed"`
		StillFailed int64 `json:"still_failed"`
		Discarded   int64 `json:"discarded"`
		Unknown     int64 `json:"unknown"`
		Skipped     int64 `json:"skipped"`
	} `json:"totals"`
	WaitingKey string     `json:"waiting_key"`
	Error      string     `json:"error"`
	CreatedAt  *time.Time `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

type resolution struct {
	ID         int64  `json:"id"`
	Resolution string `json:"resolution"`
	Error      string `json:"error"`
}

type pause struct {
	Kind      string     `json:"kind"`
	Target    string     `json:"target"`
	Until     *time.Time `json:"until"`
	Expired   bool       `json:"expired"`
	Actor     string     `json:"actor"`
	Reason    string     `json:"reason"`
	CreatedAt *time.Time `json:"created_at"`
}

type schedule struct {
	Name           string     `json:"name"`
	Spec           string     `json:"spec"`
	Location       string     `json:"location"`
	NextRun        *time.Time `json:"next_run"`
	RunningOn      string     `json:"running_on"`
	LastStartedAt  *time.Time `json:"last_started_at"`
	LastOutcome    string     `json:"last_outcome"`
	LastError      string     `json:"last_error"`
	DeclaredInCode bool       `json:"declared_in_code"`
	Request        string     `json:"request"`
	Paused         bool       `json:"paused"`
	PausedUntil    *time.Time `json:"paused_until"`
	PausedBy       string     `json:"paused_by"`
	RemovedAt      *time.Time `json:"removed_at"`
	RunNowAt       *time.Time `json:"run_now_at"`
	RunNowBy       string     `json:"run_now_by"`
}

type breakerState struct {
	Registry    string     `json:"registry"`
	Shared      bool       `json:"shared"`
	Key         string     `json:"key"`
	State       string     `json:"state"`
	Failures    int        `json:"failures"`
	OpenedAt    *time.Time `json:"opened_at"`
	RemainingMS int64      `json:"remaining_ms"`
	ProbeAt     *time.Time `json:"probe_at"`
	ProbeOwner  string     `json:"probe_owner"`
}
