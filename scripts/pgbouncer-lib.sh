# shellcheck shell=bash
# Sourced by scripts/with-postgres.sh and scripts/dev-pgbouncer.sh: starting and stopping a
# PgBouncer for tests, in transaction pooling mode, in front of one PostgreSQL server.
#
# The PgBouncer listens on 127.0.0.1 only (no unix socket, so that a port it cannot bind is
# fatal rather than a warning), lets the user postgres in without a password (auth_type trust:
# the server behind it trusts that user too), and passes any database name through to the
# server's database of that name (a wildcard entry), so a test can isolate itself in a database
# of its own: PgBouncer 1.18 refuses search_path as a startup parameter.

# pgbouncer_bin prints the path of the pgbouncer binary ($PGBOUNCER, then PATH, then
# /usr/sbin, where Debian installs it outside a non-root PATH), or fails.
pgbouncer_bin() {
	if [[ -n "${PGBOUNCER:-}" && -x "${PGBOUNCER}" ]]; then
		echo "$PGBOUNCER"
		return 0
	fi
	command -v pgbouncer 2>/dev/null && return 0
	if [[ -x /usr/sbin/pgbouncer ]]; then
		echo /usr/sbin/pgbouncer
		return 0
	fi
	return 1
}

# pgbouncer_free_port prints a free TCP port on 127.0.0.1.
pgbouncer_free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()' 2>/dev/null && return 0
	local p
	for p in $(shuf -i 30000-39999 -n 200 2>/dev/null || seq 36432 36632); do
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# pgbouncer_start DIR SERVER_HOST SERVER_PORT MAX_SERVER_CONNS POOL_SIZE [AS_OWNER...]
#
# Writes DIR/pgbouncer.ini and DIR/userlist.txt and starts PgBouncer as a daemon (pid in
# DIR/pgbouncer.pid, log in DIR/pgbouncer.log), run by the command prefix AS_OWNER (e.g.
# runuser -u postgres --: PgBouncer refuses to run as root; DIR must be writable by that user).
# It never opens more than MAX_SERVER_CONNS connections to the server, POOL_SIZE of them at
# most per database. On success it sets PGBOUNCER_PORT and PGBOUNCER_PID; it tries three
# ports, since a free port may be taken before PgBouncer binds it.
pgbouncer_start() {
	local dir="$1" host="$2" port="$3" max_conns="$4" pool_size="$5"
	shift 5
	local bin try bport pid deadline
	bin="$(pgbouncer_bin)" || {
		echo "pgbouncer: no pgbouncer binary found (install the pgbouncer package)" >&2
		return 1
	}
	((pool_size > max_conns)) && pool_size="$max_conns"
	printf '"postgres" ""\n' >"$dir/userlist.txt"
	for try in 1 2 3; do
		bport="$(pgbouncer_free_port)" || {
			echo "pgbouncer: no free port found" >&2
			return 1
		}
		rm -f "$dir/pgbouncer.pid" "$dir/pgbouncer.log"
		cat >"$dir/pgbouncer.ini" <<INI
[databases]
; any database name reaches the server's database of that name
* = host=$host port=$port

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bport
; no unix socket: a port that cannot be bound must stop PgBouncer, not leave it unix-only
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
admin_users = postgres
pool_mode = transaction
max_client_conn = 2000
default_pool_size = $pool_size
; never more server connections than the server is meant to give PgBouncer: one user
; (postgres), so max_user_connections bounds the total over every database's pool
max_user_connections = $max_conns
max_db_connections = $max_conns
; idle server connections of one database's pool hold the user's connections that another
; database's pool waits for: close them soon
server_idle_timeout = 5
autodb_idle_timeout = 60
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
log_connections = 0
log_disconnections = 0
INI
		# runuser's PAM session lowers the open-file limit to 1024: raise it to the hard limit
		# for max_client_conn.
		# shellcheck disable=SC2016
		"$@" /bin/sh -c 'ulimit -n "$(ulimit -Hn)" 2>/dev/null; exec "$0" -d "$1"' "$bin" "$dir/pgbouncer.ini" || {
			cat "$dir/pgbouncer.log" >&2 2>/dev/null
			return 1
		}
		# Daemonized: wait for the log to say it listens, or for the process to end (a port
		# taken meanwhile is fatal without a unix socket).
		deadline=$((SECONDS + 20))
		while ((SECONDS < deadline)); do
			if grep -q "listening on 127.0.0.1:$bport\$" "$dir/pgbouncer.log" 2>/dev/null; then
				PGBOUNCER_PORT="$bport"
				PGBOUNCER_PID="$(cat "$dir/pgbouncer.pid")"
				return 0
			fi
			pid="$(cat "$dir/pgbouncer.pid" 2>/dev/null || true)"
			if grep -q ' FATAL ' "$dir/pgbouncer.log" 2>/dev/null || { [[ -n "$pid" ]] && ! pgbouncer_alive "$pid"; }; then
				break
			fi
			sleep 0.05
		done
		echo "pgbouncer: did not start on 127.0.0.1:$bport (try $try):" >&2
		cat "$dir/pgbouncer.log" >&2 2>/dev/null
		pgbouncer_stop "$dir"
	done
	return 1
}

# pgbouncer_alive PID reports whether process PID runs (a zombie, which kill -0 still finds
# until its new parent reaps it, does not).
pgbouncer_alive() {
	local state
	kill -0 "$1" 2>/dev/null || return 1
	state="$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null || true)"
	[[ "$state" != "Z" && "$state" != "X" ]]
}

# pgbouncer_stop DIR stops the PgBouncer of DIR (its pid file): SIGTERM, an immediate
# shutdown, then SIGKILL if it has not exited within 10 seconds.
pgbouncer_stop() {
	local dir="$1" pid deadline
	pid="$(cat "$dir/pgbouncer.pid" 2>/dev/null || true)"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	deadline=$((SECONDS + 10))
	while pgbouncer_alive "$pid" && ((SECONDS < deadline)); do
		sleep 0.05
	done
	kill -KILL "$pid" 2>/dev/null || true
}
