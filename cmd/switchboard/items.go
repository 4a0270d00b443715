package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
)

func itemsCommand() *command {
	return &command{
		name: "items", summary: "list, find, cancel and run now the durable queue's items", needs: needsAPI,
		help: `
The durable queue's items, by state: pending (the default), parked (on an open breaker's key),
running, succeeded, dead, cancelled. A cancel and a run-now are in the audit log under the
token's principal; neither interrupts a running item.`,
		subs: []*command{
			{
				name: "ls", aliases: []string{"list"}, summary: "list items of one state", needs: needsAPI,
				help: `
Lists a page of items in the state's own order (pending: as they will run; parked: by key;
running: by lease end; finished: newest first). A full page prints the --after of the next one.

Examples:
  switchboard items ls
  switchboard items ls --state parked --key payments --limit 100
  switchboard items ls --state dead --name crm.import-contact --json`,
				setup: listItems,
			},
			{
				name: "show", args: "ID", summary: "show one item with its payload and attempts", needs: needsAPI,
				help: `
Shows the item of the id (as items ls, items find and the dashboard give it): its fields,
metadata, payload and attempts.

Examples:
  switchboard items show 1234
  switchboard items show 1234 --json | jq .item.payload`,
				setup: func(*flag.FlagSet) action { return showItem },
			},
			{
				name: "find", args: "TEXT", summary: "find items and their dead letters by reference, token or dedupe key", needs: needsAPI,
				help: `
Finds the items whose reference (the application's own id, durable.WithReference) or token is
TEXT, the item holding it as its dedupe key now (pending, running, or succeeded within its
uniqueness window), the items that died with it as their dedupe key, and their dead letters,
newest first. TEXT is matched whole. A succeeded item whose dedupe key is free again is found
by its reference or token, not by the key.

Examples:
  switchboard items find n-00168
  switchboard items find order-7781 --json | jq '.items[].id'`,
				setup: func(*flag.FlagSet) action { return findItems },
			},
			{
				name: "cancel", args: "ID", summary: "cancel a pending or parked item", needs: needsAPI,
				help: `
A running item is not interrupted, and a finished one not changed: both exit 1 saying so.

Examples:
  switchboard items cancel 1234 --reason "sent by hand"`,
				setup: cancelItem,
			},
			{
				name: "run-now", args: "ID", summary: "make a pending or parked item due now", needs: needsAPI,
				help: `
An item held back by a pause stays held (exit 1, naming the pause): resume the pause to run it.

Examples:
  switchboard items run-now 1234`,
				setup: func(*flag.FlagSet) action { return itemVerb("run-now", nil) },
			},
		},
	}
}

func listItems(fs *flag.FlagSet) action {
	state := fs.String("state", "", "the items' `state`: pending (default), parked, running, succeeded, dead, cancelled")
	name := fs.String("name", "", "only the items of this request `name`")
	key := fs.String("key", "", "only the items parked on this breaker `key`")
	from := fs.String("from", "", "only the items whose time (when due, lease end, when finished) is at or after this RFC 3339 `time`")
	to := fs.String("to", "", "only the items whose time is before this RFC 3339 `time`")
	after := fs.String("after", "", "the `cursor` of the next page, as the previous page printed it")
	limit := fs.Int("limit", 0, "at most `n` items (1–500; default 50)")
	return func(ctx context.Context, s *session, args []string) error {
		q := url.Values{}
		for k, v := range map[string]string{"state": *state, "name": *name, "key": *key, "from": *from, "to": *to, "after": *after} {
			if v != "" {
				q.Set(k, v)
			}
		}
		if *limit != 0 {
			q.Set("limit", strconv.Itoa(*limit))
		}
		var ans struct {
			Items []item `json:"items"`
			Next  string `json:"next"`
		}
		raw, err := s.api.get(ctx, "/api/items", q, &ans)
		if err != nil {
			return err
		}
		if s.out.json {
			return s.out.rawJSON(raw)
		}
		rows := make([][]string, 0, len(ans.Items))
		for _, it := range ans.Items {
			at := when(it.NextAt)
			if it.LeaseUntil != nil {
				at = when(it.LeaseUntil)
			} else if at == "" {
				at = when(it.UpdatedAt)
			}
			key := it.ParkedKey
			if key == "" {
				key = it.BreakerKey
			}
			rows = append(rows, []string{strconv.FormatInt(it.ID, 10), it.Name, it.State, strconv.Itoa(it.Attempts),
				at, key, it.LastError})
		}
		if err := s.out.table([]string{"ID", "NAME", "STATE", "ATTEMPTS", "AT", "KEY", "LAST ERROR"}, rows); err != nil {
			return err
		}
		if ans.Next != "" {
			s.out.line("\nmore: --after %s", ans.Next)
		}
		return nil
	}
}

// itemID returns the one argument as an item id.
func itemID(s *session, args []string) (int64, error) {
	if len(args) != 1 {
		return 0, usagef(s.name, "want one item ID, got %d arguments", len(args))
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || id <= 0 {
		return 0, usagef(s.name, "item ID %q is not a positive integer", args[0])
	}
	return id, nil
}

func showItem(ctx context.Context, s *session, args []string) error {
	id, err := itemID(s, args)
	if err != nil {
		return err
	}
	var ans struct {
		Item struct {
			item
			Metadata map[string]string `json:"metadata"`
		} `json:"item"`
		Attempts []attempt `json:"attempts"`
	}
	raw, err := s.api.get(ctx, fmt.Sprintf("/api/items/%d", id), nil, &ans)
	if err != nil {
		return err
	}
	if s.out.json {
		return s.out.rawJSON(raw)
	}
	it := ans.Item
	if err := s.out.fields("id", strconv.FormatInt(it.ID, 10), "name", it.Name, "state", it.State,
		"attempts", strconv.Itoa(it.Attempts), "priority", strconv.Itoa(it.Priority),
		"next at", when(it.NextAt), "lease", it.LeaseOwner+" "+when(it.LeaseUntil), "deadline", when(it.Deadline),
		"breaker key", it.BreakerKey, "parked key", it.ParkedKey, "dedupe key", it.DedupeKey,
		"debounce key", it.DebounceKey, "ordering key", it.OrderingKey, "fairness key", it.FairnessKey,
		"last error", it.LastError, "created", when(it.CreatedAt), "updated", when(it.UpdatedAt)); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(it.Metadata)) {
		s.out.line("metadata %s: %s", k, it.Metadata[k])
	}
	if p := payloadOf(raw, "item"); p != "" {
		s.out.line("payload: %s", p)
	}
	s.out.line("")
	rows := make([][]string, 0, len(ans.Attempts))
	for _, a := range ans.Attempts {
		rows = append(rows, []string{strconv.Itoa(a.Number), a.Instance, when(a.StartedAt), when(a.EndedAt), a.Outcome, a.Error})
	}
	return s.out.table([]string{"ATTEMPT", "INSTANCE", "STARTED", "ENDED", "OUTCOME", "ERROR"}, rows)
}

func findItems(ctx context.Context, s *session, args []string) error {
	if len(args) != 1 || args[0] == "" {
		return usagef(s.name, "want one TEXT to find, got %d arguments", len(args))
	}
	var ans struct {
		Items       []item       `json:"items"`
		DeadLetters []deadLetter `json:"dead_letters"`
	}
	raw, err := s.api.get(ctx, "/api/find", url.Values{"q": {args[0]}}, &ans)
	if err != nil {
		return err
	}
	if s.out.json {
		return s.out.rawJSON(raw)
	}
	if len(ans.Items) == 0 && len(ans.DeadLetters) == 0 {
		s.out.line("nothing found: no item has the reference, token or dedupe key %q (matched whole)", args[0])
		return nil
	}
	rows := make([][]string, 0, len(ans.Items))
	for _, it := range ans.Items {
		rows = append(rows, []string{strconv.FormatInt(it.ID, 10), it.Name, it.State, it.Reference, strconv.Itoa(it.Attempts), when(it.CreatedAt)})
	}
	if err := s.out.table([]string{"ID", "NAME", "STATE", "REFERENCE", "ATTEMPTS", "CREATED"}, rows); err != nil {
		return err
	}
	if len(ans.DeadLetters) == 0 {
		return nil
	}
	s.out.line("")
	rows = rows[:0]
	for _, d := range ans.DeadLetters {
		rows = append(rows, []string{strconv.FormatInt(d.ID, 10), strconv.FormatInt(d.ItemID, 10), d.Source, d.Status, d.Key, when(d.CreatedAt)})
	}
	return s.out.table([]string{"LETTER", "ITEM", "SOURCE", "STATUS", "KEY", "CREATED"}, rows)
}

func cancelItem(fs *flag.FlagSet) action {
	reason := fs.String("reason", "", "why the cancel (required; kept in the audit log)")
	return func(ctx context.Context, s *session, args []string) error {
		if *reason == "" {
			return usagef(s.name, "--reason is required: a cancel says why")
		}
		return itemVerb("cancel", map[string]string{"reason": *reason})(ctx, s, args)
	}
}

// itemVerb cancels or runs now the item of the one argument.
func itemVerb(verb string, body any) action {
	return func(ctx context.Context, s *session, args []string) error {
		id, err := itemID(s, args)
		if err != nil {
			return err
		}
		var res itemResult
		raw, err := s.api.post(ctx, fmt.Sprintf("/api/items/%d/%s", id, verb), body, &res)
		if err != nil {
			return err
		}
		if s.out.json {
			return s.out.rawJSON(raw)
		}
		s.out.line("item %d: %s (now %s)", res.ID, res.Result, res.State)
		return nil
	}
}
