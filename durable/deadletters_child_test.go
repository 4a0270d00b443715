package durable_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// childLetterEnv names the dead letter a replay child replays.
const childLetterEnv = "SWITCHBOARD_DURABLE_CHILD_LETTER"

// runReplayChild is child mode "replay": it opens the queue its parent describes, prints
// "READY", waits for a "go" line on stdin, and replays the letter childLetterEnv names. Its
// handler prints "RAN" and waits for a "finish" line before succeeding. It prints
// "RESULT <resolution>" at the end.
func runReplayChild() int {
	ctx := context.Background()
	var cfg durable.Config
	kind := os.Getenv(childBackendEnv)
	switch kind {
	case "sqlite", "postgres", "pgbouncer":
	}
	id, err := strconv.ParseInt(os.Getenv(childLetterEnv), 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	q, err := durable.Open(ctx, targetDriver(kind, os.Getenv(childTargetEnv)), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer q.Close()
	registerTypes(q)
	in := bufio.NewScanner(os.Stdin)
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Work) (mediator.Void, error) {
		fmt.Println("RAN")
		for in.Scan() && in.Text() != "finish" {
		}
		return mediator.Void{}, nil
	})
	mediator.HandleFunc(m, func(context.Context, *Keyed) (mediator.Void, error) { return mediator.Void{}, nil })
	mediator.HandleFunc(m, func(context.Context, *Unique) (mediator.Void, error) { return mediator.Void{}, nil })
	if err := m.Build(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	fmt.Println("READY")
	for in.Scan() && in.Text() != "go" {
	}
	res, err := q.Replay(ctx, m, record.DeadLetterID(id), fmt.Sprintf("process-%d", os.Getpid()))
	fmt.Println("RESULT", res, err)
	return 0
}

// replayChild is a running replay child with its stdin.
type replayChild struct {
	*child
	stdin interface{ Write([]byte) (int, error) }
}

func startReplayChild(t *testing.T, b backend, id record.DeadLetterID) *replayChild {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), childEnv+"=replay", childLetterEnv+"="+strconv.FormatInt(int64(id), 10)), b.env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 16)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = in.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return &replayChild{child: c, stdin: in}
}

// Two processes replay one letter at once: its handler runs in exactly one of them, and the
// other gets a conflict.
func TestConcurrentReplayTwoProcesses(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newDLEnv(t, b, durable.Config{})
		id := e.capture(t, "sync", 1)[0]
		children := []*replayChild{startReplayChild(t, b, id), startReplayChild(t, b, id)}
		for _, c := range children {
			c.line(t, "READY")
		}
		for _, c := range children {
			fmt.Fprintln(c.stdin, "go")
		}
		// Each child prints RAN (it holds the letter, its handler waits) or RESULT (it found the
		// letter taken): exactly one of each.
		type seen struct {
			c    *replayChild
			line string
		}
		firsts := make(chan seen, 2)
		for _, c := range children {
			go func() {
				for l := range c.lines {
					if l == "RAN" || strings.HasPrefix(l, "RESULT") {
						firsts <- seen{c, l}
						return
					}
				}
				firsts <- seen{c, "EXIT"}
			}()
		}
		timeout := time.After(60 * time.Second)
		var ran *replayChild
		var conflictLine string
		for range 2 {
			select {
			case s := <-firsts:
				switch {
				case s.line == "RAN" && ran == nil:
					ran = s.c
				case strings.HasPrefix(s.line, "RESULT"):
					conflictLine = s.line
				default:
					t.Fatalf("unexpected %q", s.line)
				}
			case <-timeout:
				t.Fatal("children printed nothing")
			}
		}
		if ran == nil || !strings.HasPrefix(conflictLine, "RESULT conflict") {
			t.Fatalf("ran %v, other %q", ran != nil, conflictLine)
		}
		fmt.Fprintln(ran.stdin, "finish")
		if got := strings.Join(ran.line(t, "RESULT"), " "); got != "RESULT replayed <nil>" {
			t.Fatalf("winner: %q", got)
		}
		for _, c := range children {
			if err := c.cmd.Wait(); err != nil {
				t.Fatal(err)
			}
		}
		d, tl := e.letter(t, id)
		if d.Status != record.DeadLetterReplayed || d.RetryCount != 1 || len(tl) != 1 || !strings.HasPrefix(tl[0].Actor, "process-") {
			t.Fatalf("letter %+v, timeline %q", d, timeline(tl))
		}
	})
}
