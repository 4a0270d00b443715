package replicas

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/switchboard-go/switchboard/benchmarks/internal/chaos"
)

// SwitchboardHotTables are the tables of switchboard's queue the readers scan and the
// Diagnoser measures.
var SwitchboardHotTables = []string{"switchboard_items", "switchboard_finished_items", "switchboard_attempts"}

// RiverHotTables are River's.
var RiverHotTables = []string{"river_job"}

// NewSwitchboard returns switchboard as a system of replica processes of bin on the database
// (and schema, by its search_path) of dsn, migrated, with workers workers per replica.
func NewSwitchboard(ctx context.Context, bin, dsn string, workers int) (*Process, error) {
	q, err := OpenSwitchboard(ctx, dsn, 0)
	if err != nil {
		return nil, err
	}
	return newProcess("switchboard", bin, "switchboard", dsn, workers, func(ctx context.Context, j chaos.Job) error {
		_, err := q.Enqueue(ctx, &SwitchboardJob{ID: j.ID, Payload: j.Payload})
		return err
	}, q.Close)
}

// NewRiver returns River as a system of replica processes of bin on the database (and schema)
// of dsn, migrated, with workers workers per replica.
func NewRiver(ctx context.Context, bin, dsn string, workers int) (*Process, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, err
	}
	drv := riverpgxv5.New(pool)
	mig, err := rivermigrate.New(drv, &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		_, err = mig.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	var c *river.Client[pgx.Tx]
	if err == nil {
		c, err = river.NewClient(drv, &river.Config{Logger: slog.New(slog.DiscardHandler)})
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	return newProcess("river", bin, "river", dsn, workers, func(ctx context.Context, j chaos.Job) error {
		_, err := c.Insert(ctx, RiverArgs{ID: j.ID, Payload: j.Payload}, nil)
		return err
	}, func() error { pool.Close(); return nil })
}
