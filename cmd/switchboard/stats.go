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

// statsTable is the table of stats, and of watch's first panel.
func statsTable(st queueStats) ([]string, [][]string) {
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	return []string{"ITEMS", "PENDING", "RUNNING", "SUCCEEDED", "DEAD", "CANCELLED", "LETTERS", "FAILED", "REPLAYED", "DISCARDED"},
		[][]string{{"", n(st.Items.Pending), n(st.Items.Running), n(st.Items.Succeeded), n(st.Items.Dead), n(st.Items.Cancelled),
			"", strconv.Itoa(st.DeadLetters.Failed), strconv.Itoa(st.DeadLetters.Replayed), strconv.Itoa(st.DeadLetters.Discarded)}}
}
