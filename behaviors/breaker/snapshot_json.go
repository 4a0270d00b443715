package breaker

import (
	"encoding/json"
	"fmt"
	"time"
)

// snapshotJSON is the JSON form of a Snapshot: names an operator reads, the state by name, the
// remaining time in milliseconds and the opening instant in RFC 3339 (null while closed).
type snapshotJSON struct {
	Key         string     `json:"key"`
	State       State      `json:"state"`
	Failures    int        `json:"failures"`
	OpenedAt    *time.Time `json:"opened_at"`
	RemainingMS int64      `json:"remaining_ms"`
	Probes      int        `json:"probes"`
	ProbeOwner  string     `json:"probe_owner,omitempty"`
}

// MarshalJSON encodes s as {"key", "state", "failures", "opened_at", "remaining_ms",
// "probes", "probe_owner" (only when set)}: the state by name ("closed", "open", "half-open"), opened_at in RFC 3339 or null,
// and the remaining open time in whole milliseconds, rounded up so that an open breaker never
// reads 0. So a plain json.Marshal of Registry.Snapshot is what the admin API answers.
func (s Snapshot) MarshalJSON() ([]byte, error) {
	j := snapshotJSON{Key: s.Key, State: s.State, Failures: s.Failures, Probes: s.Probes, ProbeOwner: s.ProbeOwner,
		RemainingMS: int64((s.Remaining + time.Millisecond - 1) / time.Millisecond)}
	if !s.OpenedAt.IsZero() {
		at := s.OpenedAt.UTC()
		j.OpenedAt = &at
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (s *Snapshot) UnmarshalJSON(data []byte) error {
	var j snapshotJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("breaker: snapshot: %w", err)
	}
	*s = Snapshot{Key: j.Key, State: j.State, Failures: j.Failures, Probes: j.Probes, ProbeOwner: j.ProbeOwner,
		Remaining: time.Duration(j.RemainingMS) * time.Millisecond}
	if j.OpenedAt != nil {
		s.OpenedAt = *j.OpenedAt
	}
	return nil
}
