package main

// rootCommand is the command tree.
func rootCommand() *command {
	return &command{
		name:    programName,
		summary: "switchboard operates a switchboard deployment: its database's migrations, and its queue, dead letters, pauses, schedules and breakers through the admin API.",
		help: `
The migrate commands work on the database (--db or SWITCHBOARD_DB: sqlite:PATH or a
postgres:// URL). Every other command calls the admin API at SWITCHBOARD_URL (or --url: the
address the admin handler is mounted at, the dashboard's) with the token in SWITCHBOARD_TOKEN,
so each change is authorised and in the audit log. Tables by default; --json prints the API's
JSON. Exit status: 0 done, 1 failed, 2 usage error.

Examples:
  switchboard migrate up --db sqlite:var/queue.db
  export SWITCHBOARD_URL=https://ops.example/admin SWITCHBOARD_TOKEN=...
  switchboard stats
  switchboard letters ls --source crm-sync
  switchboard letters replay --source crm-sync --error timeout --dry-run
  switchboard breakers reset payments
  switchboard watch --interval 5s`,
		needs: needsAll,
		subs: []*command{
			migrateCommand(), statsCommand(), itemsCommand(), lettersCommand(),
			pausesCommand(), schedulesCommand(), breakersCommand(), watchCommand(),
		},
	}
}
