#!/bin/sh
# Load figures for the chart-index server: one replica over a storage
# directory of CHARTS charts spread over TENANTS tenants, asked by `oha`
# at CONNS connections for DURATION, for each route in ROUTES (`index`:
# `GET /<tenant>/index.yaml`; `api`: `GET /api/<tenant>/charts`; a random
# tenant per request; each with `Accept-Encoding: identity`, or `gzip`
# as Helm sends it for `index-gzip` and `api-gzip`: oha's own default
# asks for gzip, compress, deflate and br), for each server binary given,
# ROUNDS times in
# turn (binaries alternate within a round, so that the machine's drift
# hits them alike). The storage is made once, and each run starts its
# server afresh.
#
#   cargo build --release -p chart-index
#   chart-index/scripts/load.sh [[LABEL=]BINARY...] [-- OHA_ARGS...]
#
# BINARY defaults to target/release/chart-index; OHA_ARGS are passed to
# oha (e.g. `-- --disable-keepalive`). Environment: CHARTS (1000),
# TENANTS (10), CONNS (64), DURATION (10s), ROUTES (index), ROUNDS (1),
# OHA (oha; `cargo install oha`), KEEP=1 keeps the work directory (and
# oha's JSON of each run). Needs python3 (replicas_load.py makes the
# packages). Prints a Markdown table: requests/s, p50, p99, the server's
# CPU time (user and system, from /proc) while oha ran over the answers
# it gave (less sensitive to other work on the machine than requests/s),
# the mean body size (oha's count of body bytes over requests answered) and the
# answers of each run (oha's requests still in flight when DURATION ends,
# "aborted due to deadline", left out), the server's VmRSS at the end,
# and the load average then.
set -eu

CHARTS=${CHARTS:-1000}
TENANTS=${TENANTS:-10}
CONNS=${CONNS:-64}
DURATION=${DURATION:-10s}
ROUTES=${ROUTES:-index}
ROUNDS=${ROUNDS:-1}
OHA=${OHA:-oha}
here=$(dirname "$0")
. "$here/common.sh"

bins=
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    bins="$bins $1"
    shift
done
[ $# -gt 0 ] && [ "$1" = "--" ] && shift
[ -n "$bins" ] || bins=target/release/chart-index
for route in $ROUTES; do
    case $route in
        index | index-gzip | api | api-gzip) ;;
        *) echo "load.sh: no route $route (index, index-gzip, api, api-gzip)" >&2; exit 2 ;;
    esac
done
for spec in $bins; do
    bin=${spec#*=}
    [ -x "$bin" ] || { echo "load.sh: no server binary at $bin (cargo build --release -p chart-index)" >&2; exit 2; }
done
command -v "$OHA" >/dev/null || { echo "load.sh: no $OHA on PATH (cargo install oha)" >&2; exit 2; }

work=$(mktemp -d)
server=
cleanup() {
    stop_server
    if [ "${KEEP:-0}" = 1 ]; then echo "load.sh: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT INT TERM

# TENANTS directories t0, t1, ...; chart c<k>, versions 1.0.<v>, CHARTS
# packages in all, dealt round the tenants (as replicas-load.sh makes them).
python3 "$here/replicas_load.py" seed "$work/storage" "$CHARTS" "$TENANTS"

tenant_re=$(seq -s '|' 0 $((TENANTS - 1)))
echo "load.sh: $CHARTS charts in $TENANTS tenants; oha -c $CONNS -z $DURATION $*; $(date -u '+%Y-%m-%d %H:%M UTC')" >&2
# The server's CPU time (user and system, in clock ticks) so far.
hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$server/stat"; }

echo "| $CONNS connections, $DURATION | route | requests/s | p50 | p99 | server CPU per answer | body | answers | VmRSS after | load average |"
echo "|---|---|---|---|---|---|---|---|---|---|"
n=0
round=1
while [ "$round" -le "$ROUNDS" ]; do
    for route in $ROUTES; do
        for spec in $bins; do
            bin=${spec#*=}
            label=${spec%%=*}
            [ "$label" = "$spec" ] && label=$bin
            n=$((n + 1))
            start_server "$label" "$bin" "$work/out.$n" "$work/err.$n" \
                --storage "$work/storage" --listen 127.0.0.1:0
            # A regular expression of URLs: the address's dots escaped.
            addr_re=$(printf '%s' "$addr" | sed 's/[.]/[.]/g')
            case $route in
                index*) url="http://$addr_re/t($tenant_re)/index[.]yaml" ;;
                api*) url="http://$addr_re/api/t($tenant_re)/charts" ;;
            esac
            case $route in
                *-gzip) encoding=gzip ;;
                *) encoding=identity ;;
            esac
            cpu0=$(cpu_ticks)
            "$OHA" --no-tui -c "$CONNS" -z "$DURATION" -H "Accept-Encoding: $encoding" "$@" \
                --output-format json -o "$work/oha.$n.json" --rand-regex-url "$url"
            cpu=$(($(cpu_ticks) - cpu0))
            load=$(cut -d' ' -f1-3 /proc/loadavg)
            rss=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$server/status")
            stop_server
            python3 - "$work/oha.$n.json" "$label, round $round" "$route" "$load" "$rss" "$cpu" "$hz" <<'EOF'
import json, sys
path, label, route, load, rss, cpu, hz = sys.argv[1:]
with open(path) as f:
    o = json.load(f)
codes = o.get("statusCodeDistribution", {})
errors = {e: n for e, n in o.get("errorDistribution", {}).items() if "deadline" not in e}
answers = ", ".join("%s × %s" % (format(n, ","), c) for c, n in sorted(codes.items()))
answers += "".join(", %s × %s" % (format(n, ","), e) for e, n in sorted(errors.items()))
p = o["latencyPercentiles"]
size = o["summary"].get("sizePerRequest") or 0
answered = sum(codes.values())
cpu_us = int(cpu) / int(hz) * 1e6 / answered if answered else float("nan")
print("| %s | %s | %s | %.2f ms | %.2f ms | %.0f µs | %.1f KiB | %s | %.1f MiB | %s |" % (
    label, route, format(round(o["summary"]["requestsPerSec"]), ","),
    p["p50"] * 1000, p["p99"] * 1000, cpu_us, size / 1024, answers, int(rss) / 1024, load))
EOF
        done
    done
    round=$((round + 1))
done
