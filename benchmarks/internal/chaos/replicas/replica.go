package replicas

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/postgres"
	"github.com/switchboard-go/switchboard/mediator"
)

// reporter writes the replica's reports, one whole line at a time.
type reporter struct {
	mu  sync.Mutex
	out io.Writer
}

func (r *reporter) report(id string, attempt int, started time.Time) {
	line := Report(id, attempt, started, time.Now())
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = io.WriteString(r.out, line)
}

// RunSwitchboard runs a switchboard replica on the database of dsn with workers workers until
// ctx ends, then shuts it down gracefully; it writes a report to out for every run of the
// handler that finished.
func RunSwitchboard(ctx context.Context, dsn string, workers int, out io.Writer) error {
	q, err := OpenSwitchboard(ctx, dsn, workers)
	if err != nil {
		return err
	}
	defer func() { _ = q.Close() }()
	rep := &reporter{out: out}
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, j *SwitchboardJob) (mediator.Void, error) {
		started := time.Now()
		if err := work(ctx); err != nil {
			return mediator.Void{}, err
		}
		d, _ := durable.FromContext(ctx, j)
		rep.report(j.ID, d.Attempt, started)
		return mediator.Void{}, nil
	})
	if err := m.Build(); err != nil {
		return err
	}
	if err := q.Start(m); err != nil {
		return err
	}
	<-ctx.Done()
	return q.Shutdown(context.Background())
}

// OpenSwitchboard opens the queue of a switchboard replica or client on dsn, with SwitchboardJob
// registered; workers 0 is the default.
func OpenSwitchboard(ctx context.Context, dsn string, workers int) (*durable.Queue, error) {
	q, err := durable.Open(ctx, postgres.Open(dsn, postgres.Config{}), durable.Config{Logger: zap.NewNop(), Workers: workers})
	if err != nil {
		return nil, fmt.Errorf("switchboard: %w", err)
	}
	durable.Register[*SwitchboardJob](q, SwitchboardName)
	return q, nil
}

// RunRiver runs a River replica on the database of dsn with workers workers until ctx ends,
// then stops it gracefully; it writes a report to out for every run of the worker that
// finished.
func RunRiver(ctx context.Context, dsn string, workers int, out io.Writer) error {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return fmt.Errorf("river: %w", err)
	}
	defer pool.Close()
	rep := &reporter{out: out}
	ws := river.NewWorkers()
	river.AddWorker(ws, river.WorkFunc(func(ctx context.Context, j *river.Job[RiverArgs]) error {
		started := time.Now()
		if err := work(ctx); err != nil {
			return err
		}
		rep.report(j.Args.ID, j.Attempt, started)
		return nil
	}))
	c, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:  slog.New(slog.DiscardHandler),
		Workers: ws,
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
	})
	if err != nil {
		return fmt.Errorf("river: %w", err)
	}
	if err := c.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("river: %w", err)
	}
	<-ctx.Done()
	return c.Stop(context.Background())
}
