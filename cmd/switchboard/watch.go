package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"
)

func watchCommand() *command {
	return &command{
		name: "watch", summary: "a view of the queue's counts, breakers and pauses, refreshed in the terminal", needs: needsAPI,
		help: `
Clears the terminal and redraws, every --interval, the queue's counts, the breakers that are
not closed (all of them with --all-breakers) and the pauses in force, until Ctrl-C. A request
that fails shows its error in the view and is tried again at the next refresh; a refused token
ends the watch. --once draws one view, without clearing the terminal, and exits (1 if a
request failed).

Examples:
  switchboard watch
  switchboard watch --interval 10s --all-breakers
  switchboard watch --once`,
		setup: watch,
	}
}

// clearScreen moves the cursor home and clears the terminal (ANSI).
const clearScreen = "\x1b[H\x1b[2J"

func watch(fs *flag.FlagSet) action {
	interval := fs.Duration("interval", 2*time.Second, "how often to refresh")
	once := fs.Bool("once", false, "draw one view and exit")
	allBreakers := fs.Bool("all-breakers", false, "list closed breakers too")
	return func(ctx context.Context, s *session, args []string) error {
		if *interval <= 0 {
			return usagef(s.name, "--interval %v is not positive", *interval)
		}
		if s.out.json {
			return usagef(s.name, "watch draws a view for a terminal: use stats, breakers ls and pauses ls with --json")
		}
		t := time.NewTicker(*interval)
		defer t.Stop()
		for {
			var b bytes.Buffer
			if !*once {
				b.WriteString(clearScreen)
			}
			err := drawView(ctx, s, &b, *interval, *once, *allBreakers)
			if ctx.Err() != nil {
				return nil // Ctrl-C: the watch is over
			}
			if _, werr := s.out.w.Write(b.Bytes()); werr != nil {
				return werr
			}
			var refused *apiError
			if errors.As(err, &refused) && (refused.status == http.StatusUnauthorized || refused.status == http.StatusForbidden) {
				return err
			}
			if *once {
				return err
			}
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}
}

// drawView writes one view to w; it returns the first error of its requests, each of which
// is shown in its panel.
func drawView(ctx context.Context, s *session, w io.Writer, interval time.Duration, once, allBreakers bool) error {
	head := fmt.Sprintf("switchboard watch  %s  %s", s.api.base, time.Now().UTC().Format("2006-01-02 15:04:05Z"))
	if !once {
		head += fmt.Sprintf("  (every %v; Ctrl-C to stop)", interval)
	}
	fmt.Fprintln(w, head)
	var first error
	panel := func(title string, draw func() error) {
		fmt.Fprintf(w, "\n%s\n", title)
		if err := draw(); err != nil {
			fmt.Fprintf(w, "  error: %v\n", err)
			if first == nil {
				first = err
			}
		}
	}
	panel("QUEUE", func() error {
		var st queueStats
		if _, err := s.api.get(ctx, "/api/queue", nil, &st); err != nil {
			return err
		}
		h, rows := statsTable(st)
		return writeTable(w, h, rows)
	})
	panel("BREAKERS", func() error {
		var ans struct {
			Breakers []breakerState `json:"breakers"`
		}
		if _, err := s.api.get(ctx, "/api/breakers", nil, &ans); err != nil {
			if isNotConfigured(err) {
				fmt.Fprintln(w, "  (no breaker registry is configured)")
				return nil
			}
			return err
		}
		shown := ans.Breakers[:0]
		for _, b := range ans.Breakers {
			if allBreakers || b.State != "closed" {
				shown = append(shown, b)
			}
		}
		if len(shown) == 0 {
			fmt.Fprintf(w, "  all %d closed\n", len(ans.Breakers))
			return nil
		}
		h, rows := breakerTable(shown)
		return writeTable(w, h, rows)
	})
	panel("PAUSES", func() error {
		var ans struct {
			Pauses []pause `json:"pauses"`
		}
		if _, err := s.api.get(ctx, "/api/pauses", nil, &ans); err != nil {
			if isNotConfigured(err) {
				fmt.Fprintln(w, "  (the queue has no pauses)")
				return nil
			}
			return err
		}
		inForce := ans.Pauses[:0]
		for _, p := range ans.Pauses {
			if !p.Expired {
				inForce = append(inForce, p)
			}
		}
		if len(inForce) == 0 {
			fmt.Fprintln(w, "  none")
			return nil
		}
		h, rows := pauseTable(inForce)
		return writeTable(w, h, rows)
	})
	return first
}

// isNotConfigured reports a 404 of a route whose component the admin handler was not given.
func isNotConfigured(err error) bool {
	var e *apiError
	return errors.As(err, &e) && e.status == http.StatusNotFound
}
