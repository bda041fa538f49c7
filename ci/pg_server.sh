#!/usr/bin/env bash
# ci/pg_server.sh start DIR | stop DIR | url DIR
#
# A throwaway PostgreSQL server for the store's tests and for trying the
# fleet store on one machine: initdb in DIR as an unprivileged user (the
# server refuses to run as root: as root this uses the `postgres` account
# Debian's package creates, else the caller), listening on a Unix socket in
# DIR only (no TCP port, nothing reachable from outside), trust
# authentication for that socket. `start` prints the URL to give --db or
# CORTEX_DB / CORTEX_TEST_PG; `stop` stops it and removes DIR.
set -euo pipefail
cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop|url DIR" >&2; exit 2; }
bindir=$(pg_config --bindir 2>/dev/null || true)
[ -x "$bindir/initdb" ] || bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$bindir/initdb" ] || { echo "$0: no PostgreSQL server binaries (apt-get install postgresql)" >&2; exit 1; }
as=()
[ "$(id -u)" -eq 0 ] && as=(runuser -u postgres --)
url() { echo "postgresql:///postgres?host=$(cd "$dir" && pwd)&user=$1"; }
who=$([ "$(id -u)" -eq 0 ] && echo postgres || id -un)
case $cmd in
start)
    mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] && chown postgres "$dir"
    "${as[@]}" "$bindir/initdb" -D "$dir/data" -U "$who" --auth=trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; exit 1; }
    "${as[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses='' -c unix_socket_directories='$(cd "$dir" && pwd)' -c fsync=off -c max_connections=64" \
        start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
    url "$who" ;;
url) url "$who" ;;
stop)
    [ -d "$dir/data" ] && "${as[@]}" "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$dir" ;;
*) echo "usage: $0 start|stop|url DIR" >&2; exit 2 ;;
esac
