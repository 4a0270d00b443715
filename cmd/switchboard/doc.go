// Command switchboard operates a switchboard deployment from a terminal: it migrates the
// durable queue's database, and reads and changes the queue, its dead letters, pauses,
// schedules and circuit breakers through the admin API (package admin), so that every change
// is authorised by the admin's token and written to its audit log under the token's
// principal, exactly as the dashboard's are.
//
// Install it with
//
//	go install github.com/switchboard-go/switchboard/cmd/switchboard@latest
//
// # Connecting
//
// The migrate commands work on the database itself: --db (or SWITCHBOARD_DB) is
// sqlite:PATH for the embedded SQLite file, or a postgres:// (postgresql://) URL for
// PostgreSQL. Every other command calls the admin API: --url (or SWITCHBOARD_URL) is the
// address the admin handler is mounted at (the dashboard's address, such as
// https://ops.example/admin), and SWITCHBOARD_TOKEN the bearer token (a --token flag exists
// but puts the token in the shell's history and the process list: prefer the variable).
//
//	export SWITCHBOARD_URL=https://ops.example/admin SWITCHBOARD_TOKEN=...
//	switchboard stats
//	switchboard items ls --state parked --key payments
//	switchboard letters replay --source crm-sync --error timeout --dry-run
//	switchboard letters replay --source crm-sync --error timeout --rate 20
//	switchboard pauses add --name billing.send-invoice --reason "provider migration"
//	switchboard breakers trip payments
//	switchboard watch
//
// # Output and exit status
//
// Results print as aligned tables; --json prints the admin API's JSON answer instead (for a
// migration, and for a followed bulk action, a JSON object of the command's result), for jq
// and scripts. The exit status is 0 on success, 1 when the command failed (a refused token,
// an unreachable address, an answer of the API that is an error, a conflict such as cancelling
// a running item) and 2 for a usage error (an unknown command or flag, a missing argument).
// Errors go to standard error, prefixed "switchboard: ".
//
// Every command has --help, with examples: switchboard --help, switchboard letters --help,
// switchboard letters replay --help.
package main
