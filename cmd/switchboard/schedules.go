package main

import (
	"context"
	"flag"
	"time"
)

func schedulesCommand() *command {
	return &command{
		name: "schedules", summary: "list, pause, resume and run scheduled requests now", needs: needsAPI,
		help: `
The durable queue's schedules (durable.Queue.Schedule in code, or added through the admin API).
A change is stored, so every instance's scheduler applies it within a second or its poll
interval; each is in the audit log under the token's principal.`,
		subs: []*command{
			{
				name: "ls", aliases: []string{"list"}, summary: "list the schedules", needs: needsAPI,
				help:  "Examples:\n  switchboard schedules ls\n  switchboard schedules ls --json | jq -r '.schedules[] | select(.paused) | .name'",
				setup: func(*flag.FlagSet) action { return listSchedules },
			},
			{
				name: "pause", args: "NAME", summary: "pause a schedule (its runs are skipped)", needs: needsAPI,
				help: `
--until (an RFC 3339 time) or --for (a duration) ends the pause by itself; without them it
lasts until resumed.

Examples:
  switchboard schedules pause nightly-report
  switchboard schedules pause nightly-report --for 48h`,
				setup: pauseSchedule,
			},
			{
				name: "resume", args: "NAME", summary: "resume a paused schedule", needs: needsAPI,
				help:  "Examples:\n  switchboard schedules resume nightly-report",
				setup: func(*flag.FlagSet) action { return scheduleVerb("resume") },
			},
			{
				name: "run-now", args: "NAME", summary: "run a schedule once, now (one instance claims the run)", needs: needsAPI,
				help:  "A run now runs even while the schedule is paused; while a run is going it waits for its end.\n\nExamples:\n  switchboard schedules run-now nightly-report",
				setup: func(*flag.FlagSet) action { return scheduleVerb("run-now") },
			},
		},
	}
}

func listSchedules(ctx context.Context, s *session, args []string) error {
	var ans struct {
		Schedules []schedule `json:"schedules"`
	}
	raw, err := s.api.get(ctx, "/api/schedules", nil, &ans)
	if err != nil {
		return err
	}
	if s.out.json {
		return s.out.rawJSON(raw)
	}
	return s.out.table(scheduleTable(ans.Schedules))
}

func scheduleTable(ss []schedule) ([]string, [][]string) {
	rows := make([][]string, 0, len(ss))
	for _, sc := range ss {
		state := "active"
		switch {
		case sc.RemovedAt != nil:
			state = "removed"
		case sc.Paused && sc.PausedUntil != nil:
			state = "paused until " + when(sc.PausedUntil)
		case sc.Paused:
			state = "paused"
		}
		last := sc.LastOutcome
		if sc.LastError != "" {
			last += ": " + sc.LastError
		}
		rows = append(rows, []string{sc.Name, sc.Spec, sc.Location, state, when(sc.NextRun), sc.RunningOn, when(sc.LastStartedAt), last})
	}
	return []string{"NAME", "SPEC", "LOCATION", "STATE", "NEXT RUN", "RUNNING ON", "LAST STARTED", "LAST OUTCOME"}, rows
}

// scheduleVerb resumes or runs now the schedule of the one argument.
func scheduleVerb(verb string) action {
	return func(ctx context.Context, s *session, args []string) error {
		return changeSchedule(ctx, s, args, verb, nil)
	}
}

func pauseSchedule(fs *flag.FlagSet) action {
	until := fs.String("until", "", "end the pause at this RFC 3339 `time`")
	forD := fs.Duration("for", 0, "end the pause after this `duration`")
	return func(ctx context.Context, s *session, args []string) error {
		end := *until
		switch {
		case end != "" && *forD != 0:
			return usagef(s.name, "give one of --until and --for, not both")
		case *forD < 0:
			return usagef(s.name, "--for %v is negative", *forD)
		case *forD > 0:
			end = time.Now().Add(*forD).UTC().Format(time.RFC3339)
		}
		var body any
		if end != "" {
			body = map[string]string{"until": end}
		}
		return changeSchedule(ctx, s, args, "pause", body)
	}
}

// changeSchedule posts verb to the schedule of the one argument and prints it as it is after.
func changeSchedule(ctx context.Context, s *session, args []string, verb string, body any) error {
	if len(args) != 1 {
		return usagef(s.name, "want one schedule NAME, got %d arguments", len(args))
	}
	var ans struct {
		Schedule schedule `json:"schedule"`
	}
	raw, err := s.api.post(ctx, "/api/schedules/"+seg(args[0])+"/"+verb, body, &ans)
	if err != nil {
		return err
	}
	if s.out.json {
		return s.out.rawJSON(raw)
	}
	return s.out.table(scheduleTable([]schedule{ans.Schedule}))
}
