#!/usr/bin/env bash
# Starts a PgBouncer in transaction pooling mode in front of a PostgreSQL server of your own,
# for the PgBouncer tests (scripts/with-postgres.sh starts one itself when it starts the server,
# but not when SWITCHBOARD_TEST_PG_DSN is already set):
#
#   eval "$(scripts/dev-pgbouncer.sh)"          # in front of $SWITCHBOARD_TEST_PG_DSN
#   eval "$(scripts/dev-pgbouncer.sh DSN)"      # in front of the server of DSN
#   scripts/dev-pgbouncer.sh stop DIR           # stops it and removes its directory
#
# It prints, on stdout, the line exporting SWITCHBOARD_TEST_PGBOUNCER_DSN, and on stderr where
# its directory (configuration, log) is and how to stop it. Only the host and port of DSN are
# used: the server must let the user postgres in from PgBouncer without a password (trust), as
# the development server does. PgBouncer opens at most PGBOUNCER_MAX_SERVER_CONNS (100)
# connections to the server, PGBOUNCER_POOL_SIZE (20) per database: keep the first well below
# the server's max_connections, which the tests connecting directly share.
set -euo pipefail
# shellcheck source=scripts/pgbouncer-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/pgbouncer-lib.sh"

if [[ "${1:-}" == "stop" ]]; then
	dir="${2:?usage: $0 stop DIR}"
	if [[ ! -f "$dir/pgbouncer.ini" ]]; then
		echo "dev-pgbouncer: $dir holds no pgbouncer.ini: not one of this script's directories" >&2
		exit 1
	fi
	pgbouncer_stop "$dir"
	rm -rf "$dir"
	echo "dev-pgbouncer: stopped; $dir removed" >&2
	exit 0
fi

dsn="${1:-${SWITCHBOARD_TEST_PG_DSN:-}}"
if [[ -z "$dsn" ]]; then
	echo "usage: $0 [DSN] (or set SWITCHBOARD_TEST_PG_DSN); $0 stop DIR" >&2
	exit 2
fi

# The server's host and port, from a URL (postgres://user@host:port/db?...) or a key=value DSN.
host=127.0.0.1
port=5432
if [[ "$dsn" == *://* ]]; then
	hostport="${dsn#*://}"
	hostport="${hostport%%[/?]*}"
	hostport="${hostport##*@}"
	if [[ "$hostport" == \[*\]* ]]; then # [IPv6]:port
		host="${hostport%%]*}"
		host="${host#[}"
		rest="${hostport#*]}"
		[[ "$rest" == :* ]] && port="${rest#:}"
	elif [[ "$hostport" == *:* ]]; then
		host="${hostport%:*}"
		port="${hostport##*:}"
	elif [[ -n "$hostport" ]]; then
		host="$hostport"
	fi
else
	for kv in $dsn; do
		case "$kv" in
		host=*) host="${kv#host=}" ;;
		port=*) port="${kv#port=}" ;;
		esac
	done
fi
if ! [[ "$port" =~ ^[0-9]+$ ]]; then
	echo "dev-pgbouncer: cannot read the port of the DSN (got $port)" >&2
	exit 2
fi

if ! pgbouncer_bin >/dev/null; then
	echo "dev-pgbouncer: no pgbouncer binary found (apt-get install pgbouncer, or set PGBOUNCER)" >&2
	exit 1
fi

dir="$(mktemp -d "${TMPDIR:-/tmp}/switchboard-pgbouncer.XXXXXX")"
chmod 755 "$dir"
as_owner=()
if [[ "$(id -u)" -eq 0 ]]; then # PgBouncer refuses to run as root
	chown postgres: "$dir"
	if command -v runuser >/dev/null 2>&1; then
		as_owner=(runuser -u postgres --)
	else
		as_owner=(su postgres -s /bin/sh -c '"$0" "$@"' --)
	fi
fi
if ! pgbouncer_start "$dir" "$host" "$port" "${PGBOUNCER_MAX_SERVER_CONNS:-100}" "${PGBOUNCER_POOL_SIZE:-20}" "${as_owner[@]}"; then
	rm -rf "$dir"
	exit 1
fi
echo "export SWITCHBOARD_TEST_PGBOUNCER_DSN='postgres://postgres@127.0.0.1:$PGBOUNCER_PORT/postgres?sslmode=disable'"
echo "dev-pgbouncer: PgBouncer (pid $PGBOUNCER_PID) on 127.0.0.1:$PGBOUNCER_PORT in front of $host:$port; log $dir/pgbouncer.log" >&2
echo "dev-pgbouncer: stop it with: $0 stop $dir" >&2
