package replicas

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/switchboard-go/switchboard/benchmarks/internal/chaos"
)

// Process is a chaos.System whose replicas are OS processes of the replica command (see
// benchmarks/cmd/chaosreplica), each printing a Report per finished run of its handler, and
// whose jobs the harness enqueues through a client of the system in its own process.
type Process struct {
	name    string
	command func(i int) *exec.Cmd
	enqueue func(ctx context.Context, j chaos.Job) error
	close   func() error

	mu          sync.Mutex
	procs       map[int]*exec.Cmd
	waits       map[int]chan struct{} // closed when replica i's process and reader are done
	readers     sync.WaitGroup
	completions chan chaos.Completion
	stderr      *os.File
}

// Name returns the system's name.
func (p *Process) Name() string { return p.name }

// Start starts n replicas, numbered 0 to n-1.
func (p *Process) Start(ctx context.Context, n int) error {
	for i := range n {
		if err := p.Restart(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

// Restart starts replica i.
func (p *Process) Restart(_ context.Context, i int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, running := p.procs[i]; running {
		return fmt.Errorf("%s: replica %d is running", p.name, i)
	}
	cmd := p.command(i)
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: replica %d: %w", p.name, i, err)
	}
	done := make(chan struct{})
	p.procs[i], p.waits[i] = cmd, done
	p.readers.Go(func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c, err := ParseReport(sc.Text()+"\n", i)
			if err != nil {
				fmt.Fprintln(p.stderr, err)
				continue
			}
			p.completions <- c
		}
		_ = cmd.Wait()
	})
	return nil
}

// Kill stops replica i with SIGKILL and waits for its process to end.
func (p *Process) Kill(_ context.Context, i int) error { return p.signal(i, syscall.SIGKILL) }

// signal sends sig to replica i and waits for its process (and its reports) to end.
func (p *Process) signal(i int, sig syscall.Signal) error {
	p.mu.Lock()
	cmd, ok := p.procs[i]
	done := p.waits[i]
	delete(p.procs, i)
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("%s: replica %d is not running", p.name, i)
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-done
	return nil
}

// Enqueue inserts j through the system's client.
func (p *Process) Enqueue(ctx context.Context, j chaos.Job) error { return p.enqueue(ctx, j) }

// Completions delivers the replicas' reports.
func (p *Process) Completions() <-chan chaos.Completion { return p.completions }

// Stop stops every replica with SIGTERM (a graceful stop), waits for them, closes the client
// and Completions.
func (p *Process) Stop(context.Context) error {
	p.mu.Lock()
	var ids []int
	for i := range p.procs {
		ids = append(ids, i)
	}
	p.mu.Unlock()
	var err error
	for _, i := range ids {
		err = errors.Join(err, p.signal(i, syscall.SIGTERM))
	}
	p.readers.Wait()
	close(p.completions)
	return errors.Join(err, p.close())
}

// newProcess returns a Process of the replica binary bin running system on dsn with workers
// workers per replica.
func newProcess(name, bin, system, dsn string, workers int, enqueue func(context.Context, chaos.Job) error, closeClient func() error) (*Process, error) {
	replicaDSN, err := WithParam(dsn, "application_name", ReplicaAppName)
	if err != nil {
		return nil, err
	}
	return &Process{
		name: name,
		command: func(i int) *exec.Cmd {
			return exec.Command(bin, "-system", system, "-dsn", replicaDSN, "-workers", fmt.Sprint(workers), "-instance", fmt.Sprint(i))
		},
		enqueue:     enqueue,
		close:       closeClient,
		procs:       map[int]*exec.Cmd{},
		waits:       map[int]chan struct{}{},
		completions: make(chan chaos.Completion, 1<<16),
		stderr:      os.Stderr,
	}, nil
}

// ReplicaAppName is the application_name of the replicas' connections: the backends the
// pg-backend-kill phase terminates (the harness's client is not among them).
const ReplicaAppName = "chaos-replica"

// WithParam returns the URL dsn with its query parameter key set to value.
func WithParam(dsn, key, value string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("dsn: %w", err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String(), nil
}
