#!/bin/sh
# Load figures for the chart-index server: one replica over a storage
# directory of CHARTS charts spread over TENANTS tenants, asked
# `GET /<tenant>/index.yaml` (a random tenant per request) by `oha` at
# CONNS connections for DURATION.
#
#   cargo build --release -p chart-index
#   chart-index/scripts/load.sh [BINARY] [-- OHA_ARGS...]
#
# BINARY defaults to target/release/chart-index; OHA_ARGS are
# passed to oha (e.g. `-- --disable-keepalive`). Environment: CHARTS
# (1000), TENANTS (10), CONNS (64), DURATION (10s), OHA (oha; `cargo
# install oha`), KEEP=1 keeps the work directory. Needs python3
# (replicas_load.py makes the packages). Prints oha's summary.
set -eu

CHARTS=${CHARTS:-1000}
TENANTS=${TENANTS:-10}
CONNS=${CONNS:-64}
DURATION=${DURATION:-10s}
OHA=${OHA:-oha}
bin=target/release/chart-index
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
    bin=$1
    shift
fi
[ $# -gt 0 ] && [ "$1" = "--" ] && shift

[ -x "$bin" ] || { echo "load.sh: no server binary at $bin (cargo build --release -p chart-index)" >&2; exit 2; }
command -v "$OHA" >/dev/null || { echo "load.sh: no $OHA on PATH (cargo install oha)" >&2; exit 2; }

work=$(mktemp -d)
server=
cleanup() {
    if [ -n "$server" ]; then
        kill -TERM "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
    fi
    if [ "${KEEP:-0}" = 1 ]; then echo "load.sh: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT INT TERM

# TENANTS directories t0, t1, ...; chart c<k>, versions 1.0.<v>, CHARTS
# packages in all, dealt round the tenants (as replicas-load.sh makes them).
python3 "$(dirname "$0")/replicas_load.py" seed "$work/storage" "$CHARTS" "$TENANTS"

: >"$work/out" # before the server's own redirection, which may come late
"$bin" --storage "$work/storage" --listen 127.0.0.1:0 >"$work/out" 2>"$work/err" &
server=$!
# The server prints LISTENING once its first index is built; give it 60 s.
addr=
tries=0
while [ -z "$addr" ]; do
    addr=$(sed -n 's|^LISTENING http://||p' "$work/out")
    if [ -z "$addr" ]; then
        kill -0 "$server" 2>/dev/null || { echo "load.sh: the server exited:" >&2; cat "$work/err" >&2; exit 1; }
        tries=$((tries + 1))
        [ $tries -lt 600 ] || { echo "load.sh: no LISTENING line within 60 s" >&2; exit 1; }
        sleep 0.1
    fi
done
tenant_re=$(seq -s '|' 0 $((TENANTS - 1)))
# A regular expression of URLs: the address's dots escaped.
addr_re=$(printf '%s' "$addr" | sed 's/[.]/[.]/g')
echo "load.sh: $CHARTS charts in $TENANTS tenants at $addr; oha -c $CONNS -z $DURATION $*" >&2
"$OHA" --no-tui -c "$CONNS" -z "$DURATION" "$@" \
    --rand-regex-url "http://$addr_re/t($tenant_re)/index[.]yaml"
