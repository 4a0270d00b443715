package main

import (
	"context"
	"flag"
	"net/http"
	"net/url"
	"strconv"
)

func breakersCommand() *command {
	return &command{
		name: "breakers", summary: "list, trip and reset circuit breakers", needs: needsAPI,
		help: `
The breakers of the admin's registries, registry by registry, by key. A trip opens a breaker by
hand (calls through it are refused, durable items of its key parked) until it is reset or its
open time passes; a reset closes it with no failures counted. Both are in the queue's audit
log under the token's principal (when the admin has a queue). A registry without a shared
store (SHARED "no") is this instance's alone: a trip through one instance's admin leaves the
others' breakers as they are. A key that two registries know needs --registry.`,
		subs: []*command{
			{
				name: "ls", aliases: []string{"list"}, summary: "list the breakers", needs: needsAPI,
				help: `
Examples:
  switchboard breakers ls
  switchboard breakers ls --json | jq -r '.breakers[] | select(.state != "closed") | .key'`,
				setup: func(*flag.FlagSet) action { return listBreakers },
			},
			{
				name: "show", args: "KEY", summary: "show one breaker", needs: needsAPI,
				help:  "Examples:\n  switchboard breakers show payments\n  switchboard breakers show payments --registry types",
				setup: func(fs *flag.FlagSet) action { return breakerVerb(fs, "") },
			},
			{
				name: "trip", args: "KEY", summary: "open a breaker by hand", needs: needsAPI,
				help: `
Examples:
  switchboard breakers trip payments
  switchboard breakers trip 'https://billing.example/v1'
  switchboard breakers trip payments --registry types`,
				setup: func(fs *flag.FlagSet) action { return breakerVerb(fs, "trip") },
			},
			{
				name: "reset", args: "KEY", summary: "close a breaker, forgetting its failures", needs: needsAPI,
				help:  "Examples:\n  switchboard breakers reset payments\n  switchboard breakers reset payments --registry types",
				setup: func(fs *flag.FlagSet) action { return breakerVerb(fs, "reset") },
			},
		},
	}
}

func listBreakers(ctx context.Context, s *session, args []string) error {
	var ans struct {
		Breakers []breakerState `json:"breakers"`
	}
	raw, err := s.api.get(ctx, "/api/breakers", nil, &ans)
	if err != nil {
		return err
	}
	if s.out.json {
		return s.out.rawJSON(raw)
	}
	return s.out.table(breakerTable(ans.Breakers))
}

// breakerTable is the table of breakers ls, and of watch's panel.
func breakerTable(bs []breakerState) ([]string, [][]string) {
	rows := make([][]string, 0, len(bs))
	for _, b := range bs {
		shared := "no"
		if b.Shared {
			shared = "yes"
		}
		rows = append(rows, []string{b.Registry, b.Key, b.State, strconv.Itoa(b.Failures), when(b.OpenedAt), dur(b.RemainingMS), when(b.ProbeAt), b.ProbeOwner, shared})
	}
	return []string{"REGISTRY", "KEY", "STATE", "FAILURES", "OPENED", "REMAINING", "PROBE AT", "PROBE OWNER", "SHARED"}, rows
}

// breakerVerb shows (verb ""), trips or resets the breaker of the one argument.
func breakerVerb(fs *flag.FlagSet, verb string) action {
	registry := fs.String("registry", "", "the `name` of the breaker's registry (\"default\" for the admin's Config.Breakers); needed when two registries know the key")
	return func(ctx context.Context, s *session, args []string) error {
		if len(args) != 1 {
			return usagef(s.name, "want one breaker KEY, got %d arguments", len(args))
		}
		var (
			b   breakerState
			raw []byte
			err error
		)
		path := "/api/breakers/" + seg(args[0])
		q := url.Values{}
		if *registry != "" {
			q.Set("registry", *registry)
		}
		if verb == "" {
			raw, err = s.api.get(ctx, path, q, &b)
		} else {
			raw, err = s.api.call(ctx, http.MethodPost, path+"/"+verb, q, nil, &b)
		}
		if err != nil {
			return err
		}
		if s.out.json {
			return s.out.rawJSON(raw)
		}
		return s.out.table(breakerTable([]breakerState{b}))
	}
}
