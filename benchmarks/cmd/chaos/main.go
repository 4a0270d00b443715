// Command chaos runs the chaos and pressure scorecard (benchmarks/internal/chaos) against
// switchboard and River on one PostgreSQL server and prints it as Markdown: each system's
// replicas are processes of the replica command, started, killed and restarted by the harness;
// the server's own faults (restart, backend kills, idle connections, an idle transaction,
// readers) act on the server given. make chaos runs it against a server of its own
// (scripts/chaos.sh).
//
//	chaos -dsn DSN -replica BIN [-pgdata DIR -pgctl PG_CTL] [-profile short|long] [-systems switchboard,river]
//	      [-docs docs/chaos.md] [-page docs/benchmarks.md -charts docs/benchmarks/chaos]
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/switchboard-go/switchboard/benchmarks/internal/benchfmt"
	"github.com/switchboard-go/switchboard/benchmarks/internal/chaos"
	"github.com/switchboard-go/switchboard/benchmarks/internal/chaos/pgchaos"
	"github.com/switchboard-go/switchboard/benchmarks/internal/chaos/replicas"
)

// replicasPerSystem is how many replica processes each system runs: two, so that killing one
// leaves a fleet that covers it, which is what a crash scenario measures.
const replicasPerSystem = 2

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

func run() error {
	dsn := flag.String("dsn", os.Getenv("SWITCHBOARD_TEST_PG_DSN"), "PostgreSQL DSN of a database the harness may create schemas in")
	bin := flag.String("replica", "", "the chaosreplica binary")
	pgdata := flag.String("pgdata", "", "the server's data directory, for postgres-restart (with -pgctl)")
	pgctl := flag.String("pgctl", "pg_ctl", "pg_ctl, for postgres-restart")
	profile := flag.String("profile", "short", "short: every duration divided (chaos by 6, pressure by 120), a few minutes a cell; long: the method's")
	systems := flag.String("systems", "switchboard,river", "the systems, in the scorecard's order")
	only := flag.String("scenarios", "", "comma-separated scenario names to run (default: all)")
	rate := flag.Float64("rate", 100, "offered jobs/s")
	workers := flag.Int("workers", 10, "workers per replica")
	out := flag.String("out", "", "write the scorecard's Markdown here as well")
	docs := flag.String("docs", "", "write the page docs/chaos.md here: the scorecard and each scenario's phases, with the run's machine, server and load")
	page := flag.String("page", "", "replace the chaos section of this page (docs/benchmarks.md) with the scorecard, the run and the charts")
	charts := flag.String("charts", "", "write the charts here (the page's docs/benchmarks/chaos); with -page")
	flag.Parse()
	if *dsn == "" || *bin == "" {
		return fmt.Errorf("-dsn and -replica are required")
	}
	started, loadStart := time.Now().UTC(), benchfmt.LoadAverage()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	admin, err := sql.Open("pgx", *dsn)
	if err != nil {
		return err
	}
	defer admin.Close()

	scenarios, err := scenariosOf(*profile, *only)
	if err != nil {
		return err
	}
	var cards []chaos.Scorecard
	for si, name := range strings.Split(*systems, ",") {
		card := chaos.Scorecard{System: name}
		for ci, sc := range scenarios {
			cell, err := runCell(ctx, admin, *dsn, *bin, name, fmt.Sprintf("chaos_%d_%d", si, ci), sc, *pgdata, *pgctl, *rate, *workers)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", name, sc.Name, err)
			}
			fmt.Fprintf(os.Stderr, "%s %s: pass %v %v\n", name, sc.Name, cell.Pass, cell.Reasons)
			card.Cells = append(card.Cells, cell)
		}
		cards = append(cards, card)
	}
	var score, phases strings.Builder
	if err := chaos.WriteMarkdown(&score, cards...); err != nil {
		return err
	}
	if err := chaos.WritePhases(&phases, cards...); err != nil {
		return err
	}
	fmt.Print(score.String(), phases.String())
	if *out != "" {
		if err := os.WriteFile(*out, []byte(score.String()+phases.String()), 0o644); err != nil {
			return err
		}
	}
	if *docs == "" && *page == "" {
		return nil
	}
	var version string
	if err := admin.QueryRowContext(ctx, "SHOW server_version").Scan(&version); err != nil {
		version = "unknown (" + err.Error() + ")"
	}
	about := fmt.Sprintf(`The method is the public PostgreSQL job-queue benchmark's
(github.com/hardbyte/postgresql-job-queue-benchmarking, docs/method.md), written anew in
benchmarks/internal/chaos: each system runs as %d replica processes with %d workers each, a 1 ms
handler on 256-byte payloads, at %.0f jobs/s offered, on one PostgreSQL server of the run's own
with durable settings; a fresh schema per cell.

- %s to %s UTC, profile %s (short: the chaos scenarios' durations divided by 6, the pressure
  cells' by 120)
- %d CPUs (%s), %s
- PostgreSQL %s
- load average at start %s, at end %s
`, replicasPerSystem, *workers, *rate, started.Format("2006-01-02 15:04"), time.Now().UTC().Format("15:04"), *profile,
		runtime.NumCPU(), benchfmt.CPUModel(), runtime.Version(), version, loadStart, benchfmt.LoadAverage())
	if *docs != "" {
		doc := "# Chaos and pressure\n\nWritten by `make chaos` (benchmarks/cmd/chaos) from one run; do not edit by hand; " +
			"the scorecard and its charts are on [benchmarks.md](benchmarks.md#chaos-and-pressure). " +
			about + "\n## Scorecard\n\n" + score.String() + "\n## Phases\n" + phases.String()
		if err := os.WriteFile(*docs, []byte(doc), 0o644); err != nil {
			return err
		}
	}
	if *page == "" {
		return nil
	}
	return writeSection(*page, *charts, cards, about, score.String())
}

// writeSection replaces the chaos section of the page at path with the run's description,
// the scorecard and the charts, which it writes into dir (a directory beside the page).
func writeSection(path, dir string, cards []chaos.Scorecard, about, score string) error {
	prev, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var body strings.Builder
	body.WriteString("Written by `make chaos` from one run. " + about + "\n" + score)
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		files, err := writeCharts(cards, dir)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(filepath.Dir(path), dir)
		if err != nil {
			return err
		}
		for _, class := range []chaos.Class{chaos.Chaos, chaos.Pressure} {
			if f := files[class]; f != "" {
				fmt.Fprintf(&body, "\n![%s scenarios: completed jobs/s of each system, a %d s moving average; shaded, the fault and pressure phases](%s)\n",
					class, smoothing, filepath.ToSlash(filepath.Join(rel, f)))
			}
		}
	}
	body.WriteString("\nEach scenario's phases, with pickup percentiles, jobs lost and run twice, the recovery after each fault, wait events, and the hot tables' dead tuples and size, are on [chaos.md](chaos.md).\n")
	next, err := benchfmt.ReplaceChaosSection(string(prev), body.String())
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, []byte(next), 0o644)
}

// scenariosOf returns the profile's scenarios, those named in only when it is not empty.
func scenariosOf(profile, only string) ([]chaos.Scenario, error) {
	chaosDiv, pressureDiv := 1, 1
	switch profile {
	case "short":
		chaosDiv, pressureDiv = 6, 120
	case "long":
	default:
		return nil, fmt.Errorf("-profile %q: want short or long", profile)
	}
	want := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		if n != "" {
			want[n] = true
		}
	}
	var out []chaos.Scenario
	for _, sc := range chaos.ChaosScenarios() {
		out = append(out, sc.Scaled(chaosDiv))
	}
	for _, sc := range chaos.PressureCells() {
		out = append(out, sc.Scaled(pressureDiv))
	}
	if len(want) == 0 {
		return out, nil
	}
	var picked []chaos.Scenario
	for _, sc := range out {
		if want[sc.Name] {
			picked = append(picked, sc)
			delete(want, sc.Name)
		}
	}
	for n := range want {
		return nil, fmt.Errorf("-scenarios: no scenario %q", n)
	}
	return picked, nil
}

// runCell runs one scenario against a fresh schema of the system.
func runCell(ctx context.Context, admin *sql.DB, dsn, bin, system, schema string, sc chaos.Scenario, pgdata, pgctl string, rate float64, workers int) (chaos.Cell, error) {
	if _, err := admin.ExecContext(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
		return chaos.Cell{}, err
	}
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		return chaos.Cell{}, err
	}
	sysDSN, err := replicas.WithParam(dsn, "search_path", schema)
	if err != nil {
		return chaos.Cell{}, err
	}
	var (
		sys chaos.System
		hot []string
	)
	switch system {
	case "switchboard":
		sys, err = replicas.NewSwitchboard(ctx, bin, sysDSN, workers)
		hot = replicas.SwitchboardHotTables
	case "river":
		sys, err = replicas.NewRiver(ctx, bin, sysDSN, workers)
		hot = replicas.RiverHotTables
	default:
		err = fmt.Errorf("no system %q", system)
	}
	if err != nil {
		return chaos.Cell{}, err
	}
	faultDB, err := sql.Open("pgx", sysDSN)
	if err != nil {
		return chaos.Cell{}, err
	}
	defer faultDB.Close()
	srv := pgchaos.Server{DB: faultDB, AppName: replicas.ReplicaAppName, HotTables: hot}
	if pgdata != "" {
		srv.Stop = func(ctx context.Context) error { return pgCtl(ctx, pgctl, "-D", pgdata, "stop", "-m", "immediate") }
		srv.Start = func(ctx context.Context) error {
			return pgCtl(ctx, pgctl, "-D", pgdata, "-l", pgdata+"/chaos.log", "-w", "start")
		}
	}
	diag := pgchaos.NewDiagnoser(srv)
	dctx, dstop := context.WithCancel(ctx)
	defer dstop()
	go diag.Run(dctx)
	res, err := chaos.Run(ctx, sys, sc, chaos.Config{Replicas: replicasPerSystem, Rate: rate, Faults: srv.Faults(), Diagnoser: diag})
	if err != nil && ctx.Err() != nil {
		return chaos.Cell{}, err
	}
	return chaos.Judge(sc, res), nil
}

// pgCtl runs pg_ctl with args, as the postgres user when this process is root (the server
// refuses to run as root).
func pgCtl(ctx context.Context, pgctl string, args ...string) error {
	name, all := pgctl, args
	if os.Geteuid() == 0 {
		name, all = "runuser", append([]string{"-u", "postgres", "--", pgctl}, args...)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, name, all...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", pgctl, strings.Join(args, " "), err, out)
	}
	return nil
}
