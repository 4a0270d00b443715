package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"
)

// bulkCommand is letters replay or letters discard (kind).
func bulkCommand(kind string) *command {
	c := &command{name: kind, args: "[ID...]", needs: needsAPI}
	c.setup = func(fs *flag.FlagSet) action { return bulkAct(fs, kind) }
	if kind == "replay" {
		c.summary = "replay the failed letters of a filter (a bulk action), or letters by id"
		c.help = `
With a filter (--source, --error, --from, --to), starts a bulk action that replays every failed
letter it selects, at --rate letters per second, and follows it until it ends, printing its
progress (--no-wait returns once it is started; Ctrl-C stops following, not the action).
--dry-run changes nothing: it prints how many letters match, with a sample. A replay of every
failed letter (no filter) needs --all. With ids instead of a filter, replays those letters (at
most 100) while it waits, and prints each one's resolution.

Examples:
  switchboard letters replay --source crm-sync --error timeout --dry-run
  switchboard letters replay --source crm-sync --error timeout --rate 20
  switchboard letters replay --source payments --reset-breaker payments
  switchboard letters replay 42 43`
	} else {
		c.summary = "discard the failed letters of a filter (a bulk action), or letters by id"
		c.help = `
As replay, but each letter is marked discarded (kept, with the reason, in its timeline) and not
run. --reason is required, except for --dry-run.

Examples:
  switchboard letters discard --source crm-sync --error "invalid email" --dry-run
  switchboard letters discard --source crm-sync --error "invalid email" --reason "bad data"
  switchboard letters discard 42 --reason duplicate`
	}
	return c
}

// terminal are the states a bulk action ends in.
var terminal = map[string]bool{"done": true, "cancelled": true, "failed": true}

func bulkAct(fs *flag.FlagSet, kind string) action {
	f := filterFlags(fs, false)
	reasonHelp := "why the " + kind + " (kept in each letter's timeline and the audit log)"
	if kind == "discard" {
		reasonHelp += "; required"
	}
	reason := fs.String("reason", "", reasonHelp)
	dry := fs.Bool("dry-run", false, "change nothing: print how many letters match, with a sample")
	all := fs.Bool("all", false, "allow a filter that selects every failed letter")
	rate := fs.Float64("rate", 0, "letters per second (at most 100000; default 50)")
	inFlight := fs.Int("max-in-flight", 0, "letters at once (0–64; default 4)")
	var reset *string
	if kind == "replay" {
		reset = fs.String("reset-breaker", "", "reset the breaker of this `key` first")
	}
	noWait := fs.Bool("no-wait", false, "return once the action is started, without following it")
	poll := fs.Duration("poll", time.Second, "how often to read the action's progress while following it")
	return func(ctx context.Context, s *session, args []string) error {
		filtered := *f != (letterFilter{})
		if kind == "discard" && *reason == "" && !*dry {
			return usagef(s.name, "--reason is required: a discard says why")
		}
		if len(args) > 0 {
			if filtered || *dry || *all {
				return usagef(s.name, "give letter IDs or a filter (--dry-run, --all), not both")
			}
			return byIDs(ctx, s, kind, args, *reason)
		}
		if !filtered && !*all && !*dry {
			return usagef(s.name, "no filter: give --source, --error, --from or --to, or --all to %s every failed letter", kind)
		}
		if *poll <= 0 {
			return usagef(s.name, "--poll %v is not positive", *poll)
		}
		body := map[string]any{"kind": kind, "filter": f, "reason": *reason, "dry_run": *dry, "rate": *rate, "max_in_flight": *inFlight}
		if reset != nil && *reset != "" {
			body["reset_breaker"] = *reset
		}
		if *dry {
			var ans struct {
				Matched int64        `json:"matched"`
				Sample  []deadLetter `json:"sample"`
			}
			raw, err := s.api.post(ctx, "/api/dead-letters/actions", body, &ans)
			if err != nil {
				return err
			}
			if s.out.json {
				return s.out.rawJSON(raw)
			}
			s.out.line("dry run: %d failed letters match; nothing was changed", ans.Matched)
			if len(ans.Sample) > 0 {
				s.out.line("")
				return s.out.table(letterTable(ans.Sample))
			}
			return nil
		}
		var ans struct {
			Action bulkAction `json:"action"`
		}
		raw, err := s.api.post(ctx, "/api/dead-letters/actions", body, &ans)
		if err != nil {
			return err
		}
		if *noWait {
			if s.out.json {
				return s.out.rawJSON(raw)
			}
			s.out.line("bulk action %d started (%s, %d letters); follow it with switchboard letters actions %d", ans.Action.ID, ans.Action.State, ans.Action.Matched, ans.Action.ID)
			return nil
		}
		return follow(ctx, s, ans.Action, *poll)
	}
}

// follow reads action a every poll until it ends, printing each change of its progress, and
// prints it as it ended; an action that failed or was cancelled is an error.
func follow(ctx context.Context, s *session, a bulkAction, poll time.Duration) error {
	if !s.out.json {
		s.out.line("bulk action %d started: %s of %d letters", a.ID, a.Kind, a.Matched)
	}
	last := ""
	t := time.NewTicker(poll)
	defer t.Stop()
	var raw []byte
	for !terminal[a.State] {
		if p := progress(a); p != last && !s.out.json {
			s.out.line("%s", p)
			last = p
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped following bulk action %d, which goes on: switchboard letters actions %d shows it, switchboard letters cancel-action %d ends it", a.ID, a.ID, a.ID)
		case <-t.C:
		}
		var err error
		if a, raw, err = getAction(ctx, s, a.ID); err != nil {
			if errors.Is(err, context.Canceled) {
				continue // the loop's select says what happened
			}
			return err
		}
	}
	if s.out.json {
		if raw == nil {
			return s.out.value(map[string]any{"action": a})
		}
		if err := s.out.rawJSON(raw); err != nil {
			return err
		}
	} else if err := s.out.table(actionTable([]bulkAction{a})); err != nil {
		return err
	}
	switch a.State {
	case "failed":
		return fmt.Errorf("bulk action %d failed: %s", a.ID, a.Error)
	case "cancelled":
		return fmt.Errorf("bulk action %d was cancelled: %s", a.ID, a.Error)
	}
	return nil
}

// progress is the line of an action's progress.
func progress(a bulkAction) string {
	p := fmt.Sprintf("%s: %d of %d settled (replayed %d, still failed %d, discarded %d, unknown %d, skipped %d)",
		a.State, a.Settled, a.Matched, a.Totals.Replayed, a.Totals.StillFailed, a.Totals.Discarded, a.Totals.Unknown, a.Totals.Skipped)
	if a.WaitingKey != "" {
		p += "; waiting on " + a.WaitingKey
	}
	if a.Error != "" {
		p += ": " + a.Error
	}
	return p
}

// byIDs replays or discards the letters of ids, and prints each one's resolution; a letter
// that was not replayed or discarded makes the exit status 1.
func byIDs(ctx context.Context, s *session, kind string, args []string, reason string) error {
	ids := make([]int64, 0, len(args))
	for _, a := range args {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id <= 0 {
			return usagef(s.name, "letter ID %q is not a positive integer", a)
		}
		ids = append(ids, id)
	}
	body := map[string]any{"ids": ids}
	if kind == "discard" {
		body["reason"] = reason
	}
	var ans struct {
		Results []resolution `json:"results"`
	}
	raw, err := s.api.post(ctx, "/api/dead-letters/"+kind, body, &ans)
	if err != nil {
		return err
	}
	if s.out.json {
		err = s.out.rawJSON(raw)
	} else {
		rows := make([][]string, 0, len(ans.Results))
		for _, r := range ans.Results {
			rows = append(rows, []string{strconv.FormatInt(r.ID, 10), r.Resolution, r.Error})
		}
		err = s.out.table([]string{"ID", "RESOLUTION", "ERROR"}, rows)
	}
	if err != nil {
		return err
	}
	want := map[string]string{"replay": "replayed", "discard": "discarded"}[kind]
	failed := 0
	for _, r := range ans.Results {
		if r.Resolution != want {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d letters were not %s", failed, len(ans.Results), want)
	}
	return nil
}
