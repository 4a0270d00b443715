package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-go/switchboard/benchmarks/internal/benchfmt"
)

func main() {
	meta := flag.String("meta", "", "print the run's description instead: start (before the benchmarks) or end (after)")
	command := flag.String("command", "", "with -meta start: the command of the run, as the page quotes it")
	in := flag.String("in", ".bench.out", "the raw go test -bench output to read")
	out := flag.String("out", "../docs", "the folder to write benchmarks.md and benchmarks/*.svg into")
	flag.Parse()
	var err error
	switch *meta {
	case "":
		err = generate(*in, *out)
	case "start":
		writeStart(os.Stdout, *command, postgresVersion(os.Getenv("SWITCHBOARD_TEST_PG_DSN")),
			pgbouncerVersion(os.Getenv("SWITCHBOARD_TEST_PGBOUNCER_DSN")))
	case "end":
		writeEnd(os.Stdout)
	default:
		err = fmt.Errorf("-meta %q: want start or end", *meta)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchdocs:", err)
		os.Exit(1)
	}
}

// writeStart prints the description of the run known before it starts.
func writeStart(w io.Writer, command, postgres, pgbouncer string) {
	fmt.Fprintln(w, benchfmt.MetaLine("date", time.Now().UTC().Format("2006-01-02 15:04 MST")))
	if command != "" {
		fmt.Fprintln(w, benchfmt.MetaLine("command", command))
	}
	fmt.Fprintln(w, benchfmt.MetaLine("nproc", fmt.Sprint(runtime.NumCPU())))
	fmt.Fprintln(w, benchfmt.MetaLine("cpu-model", benchfmt.CPUModel()))
	fmt.Fprintln(w, benchfmt.MetaLine("go", runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH))
	fmt.Fprintln(w, benchfmt.MetaLine("postgres", postgres))
	fmt.Fprintln(w, benchfmt.MetaLine("pgbouncer", pgbouncer))
	fmt.Fprintln(w, benchfmt.MetaLine("load-start", benchfmt.LoadAverage()))
}

// writeEnd prints the description of the run known once it has ended.
func writeEnd(w io.Writer) {
	fmt.Fprintln(w, benchfmt.MetaLine("load-end", benchfmt.LoadAverage()))
	fmt.Fprintln(w, benchfmt.MetaLine("date-end", time.Now().UTC().Format("2006-01-02 15:04 MST")))
}

// postgresVersion asks the server of dsn for its version; without a DSN, or when the server
// does not answer within 5 s, it says why there is none.
func postgresVersion(dsn string) string {
	if dsn == "" {
		return "not used (SWITCHBOARD_TEST_PG_DSN not set)"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	defer conn.Close(context.Background())
	var v string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return "PostgreSQL " + v
}

// pgbouncerVersion asks the PgBouncer of dsn (its admin console, database pgbouncer, which
// speaks only the simple protocol) for its version; without a DSN, or when it does not answer
// within 5 s, it says why there is none.
func pgbouncerVersion(dsn string) string {
	if dsn == "" {
		return "not used (SWITCHBOARD_TEST_PGBOUNCER_DSN not set)"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	cfg.Database = "pgbouncer"
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	defer conn.Close(context.Background())
	var v string
	if err := conn.QueryRow(ctx, "SHOW VERSION").Scan(&v); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return v + " (transaction pooling)"
}

// generate reads the output at in and writes the page and its charts under out.
func generate(in, out string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := benchfmt.Parse(f, io.Discard)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if len(r.Order) == 0 {
		return fmt.Errorf("%s: no benchmark results", in)
	}
	if r.Failed {
		// A page of the rows that ran would read as a whole run: the docs keep the last good one.
		return fmt.Errorf("%s: the run failed (a FAIL line or a panic): docs not written; see the output", in)
	}
	return writeDocs(r, out)
}
