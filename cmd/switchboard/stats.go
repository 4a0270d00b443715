package main

import (
	"context"
	"flag"
	"strconv"
)

func statsCommand() *command {
	return &command{
		name: "stats", summary: "the queue's items by state and its dead letters by status", needs: needsAPI,
		help: `
Counts the durable queue's items (pending, running, succeeded, dead, cancelled) and its dead
letters (failed, replayed, discarded): GET /api/queue.

Examples:
  switchboard stats
  switchboard stats --json | jq .dead_letters.failed`,
		setup: func(*flag.FlagSet) action { return stats },
	}
}

func stats(ctx context.Context, s *session, _ []string) error {
	var st queueStats
	raw, err := s.api.get(ctx, "/api/queue", nil, &st)
	if err != nil {
		return err
	}
	if s.out.json {
		return s.out.rawJSON(raw)
	}
	return s.out.table(statsTable(st))
}

// statsTable is the table of stats, and of watch's first panel: a line of items by state and
// one of dead letters by status.
func statsTable(st queueStats) ([]string, [][]string) {
	n := func(label string, v int64) string { return label + " " + strconv.FormatInt(v, 10) }
	l := func(label string, v int) string { return n(label, int64(v)) }
	return nil, [][]string{
		{"items", n("pending", st.Items.Pending), n("running", st.Items.Running), n("succeeded", st.Items.Succeeded),
			n("dead", st.Items.Dead), n("cancelled", st.Items.Cancelled)},
		{"dead letters", l("failed", st.DeadLetters.Failed), l("replayed", st.DeadLetters.Replayed), l("discarded", st.DeadLetters.Discarded)},
	}
}
