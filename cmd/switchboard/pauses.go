package main

import (
	"context"
	"flag"
	"time"
)

func pausesCommand() *command {
	return &command{
		name: "pauses", summary: "list, add and resume pauses of a request name or a breaker key", needs: needsAPI,
		help: `
A pause holds back the durable items of a request name (--name) or of a breaker key (--key):
they stay pending, not attempted, until it is resumed or its --until passes. Pauses are made
and resumed under the token's principal, and both are in the audit log.`,
		subs: []*command{
			{
				name: "ls", aliases: []string{"list"}, summary: "list the pauses", needs: needsAPI,
				help:  "Examples:\n  switchboard pauses ls\n  switchboard pauses ls --json",
				setup: func(*flag.FlagSet) action { return listPauses },
			},
			{
				name: "add", summary: "pause a request name or a breaker key", needs: needsAPI,
				help: `
One of --name and --key, and --reason (a pause says why). --until (an RFC 3339 time) or --for
(a duration) ends it by itself; without them it lasts until resumed.

Examples:
  switchboard pauses add --name billing.send-invoice --reason "provider migration"
  switchboard pauses add --key smtp.example.com --for 2h --reason "rate limited"`,
				setup: addPause,
			},
			{
				name: "resume", summary: "end a pause", needs: needsAPI,
				help: `
One of --name and --key. Prints whether a pause ended (false: there was none, or it had ended
already); either way the exit status is 0.

Examples:
  switchboard pauses resume --name billing.send-invoice
  switchboard pauses resume --key smtp.example.com`,
				setup: resumePause,
			},
		},
	}
}

func listPauses(ctx context.Context, s *session, args []string) error {
	var ans struct {
		Pauses []pause `json:"pauses"`
	}
	raw, err := s.api.get(ctx, "/api/pauses", nil, &ans)
	if err != nil {
		return err
	}
	if s.out.json {
		return s.out.rawJSON(raw)
	}
	return s.out.table(pauseTable(ans.Pauses))
}

// pauseTable is the table of pauses ls, and of watch's panel.
func pauseTable(ps []pause) ([]string, [][]string) {
	rows := make([][]string, 0, len(ps))
	for _, p := range ps {
		until := when(p.Until)
		if until == "" {
			until = "when resumed"
		}
		if p.Expired {
			until += " (ended)"
		}
		rows = append(rows, []string{p.Kind, p.Target, until, p.Actor, p.Reason, when(p.CreatedAt)})
	}
	return []string{"KIND", "TARGET", "UNTIL", "BY", "REASON", "SINCE"}, rows
}

// pauseTarget declares --name and --key, and returns the kind and target they name.
func pauseTarget(fs *flag.FlagSet) func(s *session) (kind, target string, err error) {
	name := fs.String("name", "", "pause the items of this request `name` (a durable.Register name)")
	key := fs.String("key", "", "pause the items of this breaker `key`")
	return func(s *session) (string, string, error) {
		switch {
		case *name != "" && *key != "":
			return "", "", usagef(s.name, "give one of --name and --key, not both")
		case *name != "":
			return "name", *name, nil
		case *key != "":
			return "breaker_key", *key, nil
		}
		return "", "", usagef(s.name, "give --name (a request name) or --key (a breaker key)")
	}
}

func addPause(fs *flag.FlagSet) action {
	target := pauseTarget(fs)
	reason := fs.String("reason", "", "why the pause (required)")
	until := fs.String("until", "", "end the pause at this RFC 3339 `time`")
	forD := fs.Duration("for", 0, "end the pause after this `duration`")
	return func(ctx context.Context, s *session, args []string) error {
		kind, tgt, err := target(s)
		if err != nil {
			return err
		}
		if *reason == "" {
			return usagef(s.name, "--reason is required: a pause says why")
		}
		end := *until
		switch {
		case end != "" && *forD != 0:
			return usagef(s.name, "give one of --until and --for, not both")
		case *forD < 0:
			return usagef(s.name, "--for %v is negative", *forD)
		case *forD > 0:
			end = time.Now().Add(*forD).UTC().Format(time.RFC3339)
		}
		var ans struct {
			Pause pause `json:"pause"`
		}
		raw, err := s.api.post(ctx, "/api/pauses", map[string]string{"kind": kind, "target": tgt, "until": end, "reason": *reason}, &ans)
		if err != nil {
			return err
		}
		if s.out.json {
			return s.out.rawJSON(raw)
		}
		return s.out.table(pauseTable([]pause{ans.Pause}))
	}
}

func resumePause(fs *flag.FlagSet) action {
	target := pauseTarget(fs)
	return func(ctx context.Context, s *session, args []string) error {
		kind, tgt, err := target(s)
		if err != nil {
			return err
		}
		var ans struct {
			Resumed bool `json:"resumed"`
		}
		raw, err := s.api.post(ctx, "/api/pauses/resume", map[string]string{"kind": kind, "target": tgt}, &ans)
		if err != nil {
			return err
		}
		if s.out.json {
			return s.out.rawJSON(raw)
		}
		if ans.Resumed {
			s.out.line("resumed the pause of %s %s", kind, tgt)
		} else {
			s.out.line("no pause of %s %s was in force: nothing changed", kind, tgt)
		}
		return nil
	}
}
