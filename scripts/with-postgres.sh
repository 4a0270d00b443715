#!/usr/bin/env bash
# Runs a command with SWITCHBOARD_TEST_PG_DSN pointing at a PostgreSQL server, and
# SWITCHBOARD_TEST_PGBOUNCER_DSN at a PgBouncer in front of it.
#
#   scripts/with-postgres.sh go test ./durable/
#
# When SWITCHBOARD_TEST_PG_DSN is already set, the command runs as is (a developer's server;
# scripts/dev-pgbouncer.sh starts a PgBouncer in front of it). Otherwise a throwaway server is
# created in a temporary directory (initdb, trust authentication, listening on 127.0.0.1 at a
# free port and on a unix socket inside that directory), a PgBouncer in transaction pooling
# mode is started in front of it (see scripts/pgbouncer-lib.sh; at most 100 of the server's 300
# connections are PgBouncer's, the rest stay for the tests that connect directly), the command
# runs with both DSNs exported, and PgBouncer and the server are stopped and the directory
# removed afterwards, whatever the command's outcome. initdb, postgres and pgbouncer refuse to
# run as root, so as root they run as the postgres user.
#
# Without the pgbouncer binary the command runs with SWITCHBOARD_TEST_PGBOUNCER_DSN unset (its
# tests skip), except under CI=true, where that is an error.
#
# The throwaway server trades durability for speed (fsync off): it is for tests only, unless
# SWITCHBOARD_PG_DURABLE=1 (make chaos: a crash of the server must lose nothing committed).
# SWITCHBOARD_PG_MAX_CONNECTIONS sets its max_connections (default 300). The command also gets
# SWITCHBOARD_TEST_PGDATA and SWITCHBOARD_TEST_PGCTL, the server's data directory and pg_ctl, to
# stop and start it (as the postgres user when run as root).
set -euo pipefail
# shellcheck source=scripts/pgbouncer-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/pgbouncer-lib.sh"

max_connections="${SWITCHBOARD_PG_MAX_CONNECTIONS:-300}"
bouncer_conns=100
bouncer_pool_size=20

if [[ $# -eq 0 ]]; then
	echo "usage: $0 command [args...]" >&2
	exit 2
fi

if [[ -n "${SWITCHBOARD_TEST_PG_DSN:-}" ]]; then
	exec "$@"
fi

find_bindir() {
	local d
	if [[ -n "${PG_BINDIR:-}" && -x "${PG_BINDIR}/initdb" ]]; then
		echo "$PG_BINDIR"
		return 0
	fi
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		if [[ -x "$d/initdb" && -x "$d/pg_ctl" ]]; then
			echo "$d"
			return 0
		fi
	done
	if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
		dirname "$(readlink -f "$(command -v pg_ctl)")"
		return 0
	fi
	return 1
}

if ! bindir="$(find_bindir)"; then
	echo "with-postgres: no PostgreSQL server binaries found (initdb, pg_ctl); set SWITCHBOARD_TEST_PG_DSN or install postgresql" >&2
	if [[ "${CI:-}" == "true" ]]; then
		exit 1
	fi
	echo "with-postgres: running without PostgreSQL; its tests will be skipped" >&2
	exec "$@"
fi

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()' 2>/dev/null && return 0
	local p
	for p in $(seq 25432 25532); do
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

tmp="$(mktemp -d "${TMPDIR:-/tmp}/switchboard-pg.XXXXXX")"
data="$tmp/data"
as_owner=()

# Installed before anything else can fail, so every exit removes the directory and stops the
# server if it got that far.
cleanup() {
	local rc=$?
	pgbouncer_stop "$tmp"
	if [[ -f "$data/postmaster.pid" ]]; then
		if ! "${as_owner[@]}" "$bindir/pg_ctl" -D "$data" -m immediate -w -t 30 stop >/dev/null 2>&1; then
			# pg_ctl could not stop it: do not leave a server running on a removed directory.
			local pid
			pid="$(head -n 1 "$data/postmaster.pid" 2>/dev/null || true)"
			[[ "$pid" =~ ^[0-9]+$ ]] && kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

chmod 755 "$tmp"
if ! port="$(free_port)"; then
	echo "with-postgres: no free port found" >&2
	exit 1
fi

if [[ "$(id -u)" -eq 0 ]]; then
	chown postgres: "$tmp"
	if command -v runuser >/dev/null 2>&1; then
		as_owner=(runuser -u postgres --)
	else
		as_owner=(su postgres -s /bin/sh -c '"$0" "$@"' --)
	fi
fi

"${as_owner[@]}" "$bindir/initdb" -D "$data" -U postgres -A trust --auth-host=trust -E UTF8 --no-locale >"$tmp/initdb.log" 2>&1 || {
	cat "$tmp/initdb.log" >&2
	exit 1
}
cat >>"$data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$tmp'
max_connections = $max_connections
shared_buffers = 128MB
CONF
if [[ "${SWITCHBOARD_PG_DURABLE:-}" != "1" ]]; then
	cat >>"$data/postgresql.conf" <<CONF
fsync = off
synchronous_commit = off
full_page_writes = off
CONF
fi
if ! "${as_owner[@]}" "$bindir/pg_ctl" -D "$data" -l "$tmp/server.log" -w -t 60 start >/dev/null; then
	cat "$tmp/server.log" >&2
	exit 1
fi

export SWITCHBOARD_TEST_PG_DSN="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
export SWITCHBOARD_TEST_PGDATA="$data" SWITCHBOARD_TEST_PGCTL="$bindir/pg_ctl"
echo "with-postgres: $("$bindir/postgres" --version) on 127.0.0.1:$port" >&2

if pgbouncer_bin >/dev/null; then
	pgbouncer_start "$tmp" 127.0.0.1 "$port" "$bouncer_conns" "$bouncer_pool_size" "${as_owner[@]}"
	export SWITCHBOARD_TEST_PGBOUNCER_DSN="postgres://postgres@127.0.0.1:$PGBOUNCER_PORT/postgres?sslmode=disable"
	echo "with-postgres: $("$(pgbouncer_bin)" --version | head -n 1) (transaction pooling) on 127.0.0.1:$PGBOUNCER_PORT" >&2
elif [[ "${CI:-}" == "true" ]]; then
	echo "with-postgres: no pgbouncer binary found; under CI=true the PgBouncer tests must run (install pgbouncer)" >&2
	exit 1
else
	unset SWITCHBOARD_TEST_PGBOUNCER_DSN
	echo "with-postgres: no pgbouncer binary found: running without PgBouncer; its tests will be skipped" >&2
fi
set +e
"$@"
rc=$?
set -e
# A deadlock the tests met is told with the statements of both sides, which only the server's
# log holds (the client's error names its own side alone).
if grep -q "deadlock detected" "$tmp/server.log" 2>/dev/null; then
	echo "with-postgres: the server detected a deadlock; from its log:" >&2
	grep -B 2 -A 14 "deadlock detected" "$tmp/server.log" >&2 || true
fi
exit "$rc"
