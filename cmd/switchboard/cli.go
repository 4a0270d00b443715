package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// Exit statuses: success, a failed command, a command used wrongly.
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	programName = "switchboard"
)

// action runs a command with its positional arguments, once its flags are parsed.
type action func(ctx context.Context, s *session, args []string) error

// command is a node of the command tree: a group (with subs) or a leaf (with setup).
type command struct {
	name    string
	aliases []string
	// args is the synopsis of the positional arguments ("ID", "KEY").
	args    string
	summary string
	// help is the longer text of --help: what the command does, then its examples.
	help string
	// needs says which connection flags the command takes.
	needs needs
	// setup declares the command's own flags on fs and returns the action that reads them.
	setup func(fs *flag.FlagSet) action
	subs  []*command
}

// needs is the connection a command uses.
type needs int

const (
	needsNothing needs = iota
	needsAPI           // --url, --token, --timeout
	needsDB            // --db
	needsAll           // the root: any of them, before the command
)

// usageError is a command used wrongly: exit status 2, with a hint to its help.
type usageError struct {
	path string // the command, "switchboard items show"
	msg  string
	help string // printed before the message, when the command's help says what was missing
}

func (e *usageError) Error() string {
	return e.msg + " (see " + e.path + " --help)"
}

func usagef(path, format string, args ...any) error {
	return &usageError{path: path, msg: fmt.Sprintf(format, args...)}
}

// run is the whole tool: it parses args, runs the command and returns the exit status.
// getenv supplies SWITCHBOARD_URL, SWITCHBOARD_TOKEN and SWITCHBOARD_DB.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	g := &globals{
		url:     getenv("SWITCHBOARD_URL"),
		token:   getenv("SWITCHBOARD_TOKEN"),
		db:      getenv("SWITCHBOARD_DB"),
		timeout: 30 * time.Second,
	}
	root := rootCommand()
	err := dispatch(ctx, root, []string{programName}, args, g, stdout)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, new(*usageError)):
		var u *usageError
		errors.As(err, &u)
		if u.help != "" {
			fmt.Fprint(stderr, u.help+"\n")
		}
		fmt.Fprintln(stderr, programName+": "+err.Error())
		return exitUsage
	default:
		fmt.Fprintln(stderr, programName+": "+err.Error())
		return exitFailed
	}
}

// dispatch parses the flags of cmd (path names it) from args and runs it, or the sub-command
// args name.
func dispatch(ctx context.Context, cmd *command, path, args []string, g *globals, stdout io.Writer) error {
	name := strings.Join(path, " ")
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	g.declare(fs, cmd.needs)
	var act action
	if cmd.setup != nil {
		act = cmd.setup(fs)
	}
	if len(cmd.subs) > 0 {
		// A group's flags come before its sub-command: switchboard --json stats.
		if err := fs.Parse(args); err != nil {
			return flagError(fs, cmd, name, stdout, err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			var help strings.Builder
			writeHelp(&help, cmd, name, fs)
			what := "no command given"
			if len(path) > 1 {
				what = "no " + strings.Join(path[1:], " ") + " command given"
			}
			return &usageError{path: name, msg: what, help: help.String()}
		}
		if rest[0] == "help" {
			return helpOf(cmd, path, rest[1:], g, stdout)
		}
		sub := cmd.find(rest[0])
		if sub == nil {
			return usagef(name, "unknown command %q", strings.Join(append(path[1:], rest[0]), " "))
		}
		return dispatch(ctx, sub, append(path, sub.name), rest[1:], g, stdout)
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return flagError(fs, cmd, name, stdout, err)
	}
	if cmd.args == "" && len(pos) > 0 {
		return usagef(name, "unexpected argument %q", pos[0])
	}
	s, err := g.session(name, cmd.needs, stdout)
	if err != nil {
		return err
	}
	return act(ctx, s, pos)
}

// helpOf answers "switchboard help items replay": the help of the command named.
func helpOf(cmd *command, path, names []string, g *globals, stdout io.Writer) error {
	for _, n := range names {
		sub := cmd.find(n)
		if sub == nil {
			return usagef(strings.Join(path, " "), "unknown command %q", n)
		}
		cmd, path = sub, append(path, sub.name)
	}
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	g.declare(fs, cmd.needs)
	if cmd.setup != nil {
		cmd.setup(fs)
	}
	writeHelp(stdout, cmd, strings.Join(path, " "), fs)
	return nil
}

func (c *command) find(name string) *command {
	for _, s := range c.subs {
		if s.name == name {
			return s
		}
		for _, a := range s.aliases {
			if a == name {
				return s
			}
		}
	}
	return nil
}

// flagError answers a flag the parser refused; -h and --help print the help to stdout.
func flagError(fs *flag.FlagSet, cmd *command, name string, stdout io.Writer, err error) error {
	if errors.Is(err, flag.ErrHelp) {
		writeHelp(stdout, cmd, name, fs)
		return flag.ErrHelp
	}
	return &usageError{path: name, msg: err.Error()}
}

// parseInterleaved parses fs from args, where flags may follow the positional arguments
// (switchboard items show 42 --json), and returns the positional arguments. After "--" every
// argument is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// writeHelp prints the help of cmd: its synopsis, text, sub-commands and flags.
func writeHelp(w io.Writer, cmd *command, name string, fs *flag.FlagSet) {
	synopsis := name
	if len(cmd.subs) > 0 {
		synopsis += " COMMAND"
	}
	if hasFlags(fs) {
		synopsis += " [flags]"
	}
	if cmd.args != "" {
		synopsis += " " + cmd.args
	}
	fmt.Fprintf(w, "Usage: %s\n\n", synopsis)
	if cmd.summary != "" {
		fmt.Fprintf(w, "%s\n", cmd.summary)
	}
	if cmd.help != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(cmd.help))
	}
	if len(cmd.subs) > 0 {
		fmt.Fprintf(w, "\nCommands:\n")
		width := 0
		for _, s := range cmd.subs {
			width = max(width, len(s.name))
		}
		for _, s := range cmd.subs {
			fmt.Fprintf(w, "  %-*s  %s\n", width, s.name, s.summary)
		}
		fmt.Fprintf(w, "\nRun '%s COMMAND --help' for a command's flags and examples.\n", name)
	}
	if hasFlags(fs) {
		fmt.Fprintf(w, "\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}
