package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/postgres"
	"github.com/switchboard-go/switchboard/durable/sqlite"
)

func migrateCommand() *command {
	return &command{
		name:    "migrate",
		summary: "apply or list the durable queue's schema migrations, on the database itself",
		help: `
The database is --db (or SWITCHBOARD_DB): sqlite:PATH for the embedded SQLite file
(sqlite:var/queue.db, sqlite:/srv/queue.db), or a postgres:// or postgresql:// URL (a
search_path parameter selects the schema). These commands need no admin API: run them from a
deploy step before the new version starts (durable.Open migrates too, unless its
Config.SkipMigrations is set).`,
		needs: needsDB,
		subs: []*command{
			{
				name: "up", summary: "apply the migrations the database lacks", needs: needsDB,
				help: `
Applies each missing migration in its own transaction, in order, and prints each one applied.
Instances that migrate at the same time apply each migration once, so running it beside a
deploy is safe. A SQLite file that does not exist is created.

Examples:
  switchboard migrate up --db sqlite:var/queue.db
  SWITCHBOARD_DB='postgres://switchboard@db.internal/app?sslmode=require' switchboard migrate up`,
				setup: func(*flag.FlagSet) action { return migrateUp },
			},
			{
				name: "status", summary: "list the migrations, applied and missing", needs: needsDB,
				help: `
Lists every migration this version of switchboard has, each applied or missing, and the
schema's version. It changes nothing (a SQLite file that does not exist is an error, not
created). Exit status 0 even when migrations are missing: read the list, or --json's
"missing".

Examples:
  switchboard migrate status --db sqlite:var/queue.db
  switchboard migrate status --json | jq '.missing | length'`,
				setup: func(*flag.FlagSet) action { return migrateStatus },
			},
			{
				name: "down", summary: "not offered: the schema has no down migrations", needs: needsDB,
				help: `
switchboard ships its schema's migrations forward only: none has a reverse script, and this
tool writes none of its own (a guessed DROP would lose items and dead letters). To go back,
restore the backup of the database taken before migrate up. This command says so and exits 1,
changing nothing.`,
				setup: func(*flag.FlagSet) action { return migrateDown },
			},
		},
	}
}

// openDB returns the executor of the database dsn names, not migrated; create says whether a
// SQLite file that does not exist may be created.
func openDB(ctx context.Context, s *session, create bool) (driver.Executor, error) {
	if s.db == "" {
		return nil, usagef(s.name, "no database: set SWITCHBOARD_DB (or --db) to sqlite:PATH or a postgres:// URL")
	}
	var drv driver.Driver
	switch {
	case strings.HasPrefix(s.db, "sqlite:"):
		path := strings.TrimPrefix(s.db, "sqlite:")
		if rest, ok := strings.CutPrefix(path, "//"); ok {
			path = rest // sqlite://var/queue.db, sqlite:///srv/queue.db
		}
		if path == "" {
			return nil, usagef(s.name, "the database %q names no file: sqlite:PATH", s.db)
		}
		if !create {
			if _, err := os.Stat(path); err != nil {
				return nil, fmt.Errorf("no SQLite database at %s: %w", path, err)
			}
		}
		drv = sqlite.Open(path)
	case strings.HasPrefix(s.db, "postgres://"), strings.HasPrefix(s.db, "postgresql://"):
		drv = postgres.Open(s.db, postgres.Config{MaxConns: 2})
	default:
		return nil, usagef(s.name, "the database %q is neither sqlite:PATH nor a postgres:// URL", redact(s.db))
	}
	return drv.Open(ctx)
}

// redact hides the password of a URL-like DSN in an error.
func redact(dsn string) string {
	return passwordRE.ReplaceAllString(dsn, "$1:xxxxx@")
}

var passwordRE = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]*://[^:/@]*):[^@/]*@`)

// migrationRecord is a migration in the JSON of migrate up and status.
type migrationRecord struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	Applied bool   `json:"applied"`
}

func migrateUp(ctx context.Context, s *session, _ []string) error {
	ex, err := openDB(ctx, s, true)
	if err != nil {
		return err
	}
	defer ex.Close()
	var applied []migrationRecord
	err = ex.Migrate(ctx, func(m driver.Migration) {
		applied = append(applied, migrationRecord{Version: m.Version, Name: m.Name, Applied: true})
		if !s.out.json {
			s.out.line("applied %s", m.Name)
		}
	})
	if err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	v, err := ex.Version(ctx)
	if err != nil {
		return err
	}
	if s.out.json {
		return s.out.value(struct {
			Applied []migrationRecord `json:"applied"`
			Version int               `json:"version"`
		}{append([]migrationRecord{}, applied...), v})
	}
	if len(applied) == 0 {
		s.out.line("the schema is up to date: version %d", v)
	} else {
		s.out.line("%d migrations applied: the schema is at version %d", len(applied), v)
	}
	return nil
}

func migrateStatus(ctx context.Context, s *session, _ []string) error {
	ex, err := openDB(ctx, s, false)
	if err != nil {
		return err
	}
	defer ex.Close()
	v, err := ex.Version(ctx)
	if err != nil {
		return err
	}
	missing, err := ex.MissingMigrations(ctx)
	if err != nil {
		return err
	}
	names := migrationNames(strings.HasPrefix(s.db, "sqlite:"))
	lacks := map[int]bool{}
	for _, m := range missing {
		lacks[m] = true
	}
	// The versions the driver's migrations have (they may skip a number), in order.
	list := make([]migrationRecord, 0, len(names))
	for _, n := range slices.Sorted(maps.Keys(names)) {
		list = append(list, migrationRecord{Version: n, Name: names[n], Applied: !lacks[n]})
	}
	if s.out.json {
		return s.out.value(struct {
			Version       int               `json:"version"`
			SchemaVersion int               `json:"schema_version"`
			Missing       []int             `json:"missing"`
			Migrations    []migrationRecord `json:"migrations"`
		}{v, ex.SchemaVersion(), append([]int{}, missing...), list})
	}
	rows := make([][]string, 0, len(list))
	for _, m := range list {
		state := "applied"
		if !m.Applied {
			state = "missing"
		}
		rows = append(rows, []string{fmt.Sprintf("%04d", m.Version), m.Name, state})
	}
	if err := s.out.table([]string{"VERSION", "NAME", "STATE"}, rows); err != nil {
		return err
	}
	if len(missing) == 0 {
		s.out.line("\nthe schema is up to date: version %d", v)
	} else {
		s.out.line("\n%d of %d migrations missing: run switchboard migrate up", len(missing), ex.SchemaVersion())
	}
	return nil
}

// migrationNames returns the names of the migrations, by version, from the driver's
// MigrationSQL (whose header of each migration names it).
func migrationNames(sqliteDB bool) map[int]string {
	script := postgres.MigrationSQL()
	if sqliteDB {
		script = sqlite.MigrationSQL()
	}
	names := map[int]string{}
	for _, m := range migrationHeader.FindAllStringSubmatch(script, -1) {
		if v, err := strconv.Atoi(m[1]); err == nil {
			names[v] = m[2]
		}
	}
	return names
}

var migrationHeader = regexp.MustCompile(`(?m)^-- Migration (\d+): (\S+)$`)

func migrateDown(context.Context, *session, []string) error {
	return errors.New("migrate down: the durable schema has no down migrations (switchboard ships them forward only), and this tool writes none: restore the backup taken before migrate up to go back; nothing was changed")
}
