package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer the process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// watch redraws the view, clearing the terminal before each, until Ctrl-C, which ends it with
// exit status 0.
func TestWatchRefreshesUntilInterrupted(t *testing.T) {
	s := newServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "watch", "--interval", "50ms")
	cmd.Env = append(os.Environ(), "SWITCHBOARD_URL="+s.url, "SWITCHBOARD_TOKEN="+token)
	var out, errOut syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Polling the output, with a deadline, for a second view.
	for deadline := time.Now().Add(30 * time.Second); strings.Count(out.String(), clearScreen) < 2; {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("no second view in 30s:\n%q\n%s", out.String(), errOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("watch after Ctrl-C: %v\n%s", err, errOut.String())
	}
	view := out.String()
	if !strings.Contains(view, "(every 50ms; Ctrl-C to stop)") || !strings.Contains(view, "QUEUE") || !strings.Contains(view, "all 2 closed") {
		t.Fatalf("the view:\n%s", view)
	}
}
