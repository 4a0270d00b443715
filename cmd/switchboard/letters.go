package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"strconv"
)

func lettersCommand() *command {
	return &command{
		name: "letters", summary: "list, inspect, replay and discard dead letters", needs: needsAPI,
		help: `
Dead letters are the requests the durable queue gave up on. replay and discard act on the
letters of a filter, as a bulk action the queue's schedulers run at a rate (try it with
--dry-run first), or on letters by id. Every replay and discard is in the letter's timeline
and the audit log under the token's principal.`,
		subs: []*command{
			{
				name: "ls", aliases: []string{"list"}, summary: "list dead letters", needs: needsAPI,
				help: `
Examples:
  switchboard letters ls
  switchboard letters ls --status failed --source crm-sync --error timeout
  switchboard letters ls --from 2026-01-02T00:00:00Z --limit 500 --json`,
				setup: listLetters,
			},
			{
				name: "show", aliases: []string{"inspect"}, args: "ID", summary: "show one letter with its payload and timeline", needs: needsAPI,
				help:  "Examples:\n  switchboard letters show 42\n  switchboard letters show 42 --json | jq .dead_letter.payload",
				setup: func(*flag.FlagSet) action { return showLetter },
			},
			bulkCommand("replay"),
			bulkCommand("discard"),
			{
				name: "actions", args: "[ID]", summary: "list the bulk actions, or show one", needs: needsAPI,
				help:  "Examples:\n  switchboard letters actions\n  switchboard letters actions 7",
				setup: func(*flag.FlagSet) action { return listActions },
			},
			{
				name: "cancel-action", args: "ID", summary: "cancel a bulk action (the letters it settled stay settled)", needs: needsAPI,
				help:  "Examples:\n  switchboard letters cancel-action 7 --reason \"wrong filter\"",
				setup: cancelAction,
			},
		},
	}
}

// filterFlags declares the filter of a listing or bulk action.
func filterFlags(fs *flag.FlagSet, status bool) *letterFilter {
	f := &letterFilter{}
	if status {
		fs.StringVar(&f.Status, "status", "", "only letters of this `status`: failed, replayed or discarded")
	}
	fs.StringVar(&f.Source, "source", "", "only letters of this `source` (the batch, or the request name of a dead item)")
	fs.StringVar(&f.From, "from", "", "only letters created at or after this RFC 3339 `time`")
	fs.StringVar(&f.To, "to", "", "only letters created before this RFC 3339 `time`")
	fs.StringVar(&f.Error, "error", "", "only letters whose error holds this `text` (ignoring case)")
	return f
}

func listLetters(fs *flag.FlagSet) action {
	f := filterFlags(fs, true)
	limit := fs.Int("limit", 0, "at most `n` letters (≤ 500)")
	offset := fs.Int("offset", 0, "skip the first `n` letters")
	return func(ctx context.Context, s *session, args []string) error {
		q := url.Values{}
		for k, v := range map[string]string{"status": f.Status, "source": f.Source, "from": f.From, "to": f.To, "error": f.Error} {
			if v != "" {
				q.Set(k, v)
			}
		}
		if *limit != 0 {
			q.Set("limit", strconv.Itoa(*limit))
		}
		if *offset != 0 {
			q.Set("offset", strconv.Itoa(*offset))
		}
		var ans struct {
			DeadLetters []deadLetter `json:"dead_letters"`
			Total       int          `json:"total"`
		}
		raw, err := s.api.get(ctx, "/api/dead-letters", q, &ans)
		if err != nil {
			return err
		}
		if s.out.json {
			return s.out.rawJSON(raw)
		}
		if err := s.out.table(letterTable(ans.DeadLetters)); err != nil {
			return err
		}
		if len(ans.DeadLetters) < ans.Total {
			s.out.line("\n%d of %d letters shown: --offset %d for more", len(ans.DeadLetters), ans.Total, *offset+len(ans.DeadLetters))
		}
		return nil
	}
}

func letterTable(ds []deadLetter) ([]string, [][]string) {
	rows := make([][]string, 0, len(ds))
	for _, d := range ds {
		rows = append(rows, []string{strconv.FormatInt(d.ID, 10), d.Status, d.Source, d.Name, d.Key,
			strconv.Itoa(d.RetryCount), when(d.CreatedAt), d.Error})
	}
	return []string{"ID", "STATUS", "SOURCE", "NAME", "KEY", "RETRIES", "CREATED", "ERROR"}, rows
}

func showLetter(ctx context.Context, s *session, args []string) error {
	if len(args) != 1 {
		return usagef(s.name, "want one letter ID, got %d arguments", len(args))
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || id <= 0 {
		return usagef(s.name, "letter ID %q is not a positive integer", args[0])
	}
	var ans struct {
		DeadLetter deadLetter      `json:"dead_letter"`
		Timeline   []timelineEntry `json:"timeline"`
	}
	raw, err := s.api.get(ctx, fmt.Sprintf("/api/dead-letters/%d", id), nil, &ans)
	if err != nil {
		return err
	}
	if s.out.json {
		return s.out.rawJSON(raw)
	}
	d := ans.DeadLetter
	item := ""
	if d.ItemID != 0 {
		item = strconv.FormatInt(d.ItemID, 10) // a letter of a batch had no item
	}
	if err := s.out.fields("id", strconv.FormatInt(d.ID, 10), "status", d.Status, "source", d.Source, "name", d.Name,
		"key", d.Key, "item", item, "retries", strconv.Itoa(d.RetryCount), "cause", d.Cause,
		"error", d.Error, "created", when(d.CreatedAt), "updated", when(d.UpdatedAt),
		"payload", payloadOf(raw, "dead_letter")); err != nil {
		return err
	}
	s.out.line("")
	rows := make([][]string, 0, len(ans.Timeline))
	for _, e := range ans.Timeline {
		who := e.Instance
		if e.Actor != "" {
			who = e.Actor
		}
		detail := e.Error
		if e.Reason != "" {
			detail = e.Reason
		}
		if e.BulkAction != 0 {
			detail = fmt.Sprintf("bulk action %d; %s", e.BulkAction, detail)
		}
		rows = append(rows, []string{e.Kind, strconv.Itoa(e.Number), when(e.StartedAt), when(e.EndedAt), who, e.Outcome, detail})
	}
	return s.out.table([]string{"EVENT", "N", "STARTED", "ENDED", "BY", "OUTCOME", "DETAIL"}, rows)
}

func listActions(ctx context.Context, s *session, args []string) error {
	switch len(args) {
	case 0:
	case 1:
		id, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || id <= 0 {
			return usagef(s.name, "bulk action ID %q is not a positive integer", args[0])
		}
		a, raw, err := getAction(ctx, s, id)
		if err != nil {
			return err
		}
		if s.out.json {
			return s.out.rawJSON(raw)
		}
		return s.out.table(actionTable([]bulkAction{a}))
	default:
		return usagef(s.name, "want at most one bulk action ID, got %d arguments", len(args))
	}
	var ans struct {
		Actions []bulkAction `json:"actions"`
	}
	raw, err := s.api.get(ctx, "/api/dead-letters/actions", nil, &ans)
	if err != nil {
		return err
	}
	if s.out.json {
		return s.out.rawJSON(raw)
	}
	return s.out.table(actionTable(ans.Actions))
}

func getAction(ctx context.Context, s *session, id int64) (bulkAction, []byte, error) {
	var ans struct {
		Action bulkAction `json:"action"`
	}
	raw, err := s.api.get(ctx, fmt.Sprintf("/api/dead-letters/actions/%d", id), nil, &ans)
	return ans.Action, raw, err
}

func actionTable(as []bulkAction) ([]string, [][]string) {
	rows := make([][]string, 0, len(as))
	for _, a := range as {
		filter := ""
		for _, kv := range [][2]string{{"source", a.Filter.Source}, {"error", a.Filter.Error}, {"from", a.Filter.From}, {"to", a.Filter.To}} {
			if kv[1] != "" {
				filter += kv[0] + "=" + kv[1] + " "
			}
		}
		t := a.Totals
		rows = append(rows, []string{strconv.FormatInt(a.ID, 10), a.Kind, a.State, filter, a.Actor,
			fmt.Sprintf("%d/%d", a.Settled, a.Matched),
			fmt.Sprintf("replayed %d, still failed %d, discarded %d, unknown %d, skipped %d", t.Replayed, t.StillFailed, t.Discarded, t.Unknown, t.Skipped),
			a.Error})
	}
	return []string{"ID", "KIND", "STATE", "FILTER", "BY", "SETTLED", "TOTALS", "ERROR"}, rows
}

func cancelAction(fs *flag.FlagSet) action {
	reason := fs.String("reason", "", "why the cancel (kept on the action)")
	return func(ctx context.Context, s *session, args []string) error {
		if len(args) != 1 {
			return usagef(s.name, "want one bulk action ID, got %d arguments", len(args))
		}
		id, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || id <= 0 {
			return usagef(s.name, "bulk action ID %q is not a positive integer", args[0])
		}
		var ans struct {
			Action bulkAction `json:"action"`
		}
		var body any
		if *reason != "" {
			body = map[string]string{"reason": *reason}
		}
		raw, err := s.api.post(ctx, fmt.Sprintf("/api/dead-letters/actions/%d/cancel", id), body, &ans)
		if err != nil {
			return err
		}
		if s.out.json {
			return s.out.rawJSON(raw)
		}
		return s.out.table(actionTable([]bulkAction{ans.Action}))
	}
}
