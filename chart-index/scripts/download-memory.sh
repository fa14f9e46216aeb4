#!/bin/sh
# Memory per download: the server's resident memory (VmRSS) while CLIENTS
# clients download one SIZE_MB chart package at once, for each server
# binary given (`label=path`), ROUNDS times in turn.
#
#   cargo build --release -p chart-index        # in a checkout of each commit
#   ROUNDS=2 chart-index/scripts/download-memory.sh before=BIN_A after=BIN_B
#
# Each client is `curl --limit-rate RATE` (25M by default: a download takes
# about SIZE_MB/25 s, so that all of them are under way together, as slow
# clients' would be). VmRSS is sampled every 20 ms from /proc while they
# run. Prints per run: VmRSS once listening, the highest sampled while the
# downloads ran, VmHWM (the peak since the start, which includes the
# start's own read of the package to index it), the downloads' wall
# time, and the load average when they ended. Environment: SIZE_MB (100), CLIENTS (32), RATE (25M), ROUNDS
# (1), KEEP=1 keeps the work directory. Linux only (/proc). Needs python3
# and curl.
set -eu

SIZE_MB=${SIZE_MB:-100}
CLIENTS=${CLIENTS:-32}
RATE=${RATE:-25M}
ROUNDS=${ROUNDS:-1}
[ $# -gt 0 ] || { echo "usage: $0 label=BINARY..." >&2; exit 2; }

. "$(dirname "$0")/common.sh"
work=$(mktemp -d)
server=
cleanup() {
    stop_server
    if [ "${KEEP:-0}" = 1 ]; then echo "download-memory.sh: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT INT TERM

# One chart, big-1.0.0, whose package holds SIZE_MB MiB of random bytes
# (which do not compress).
mkdir -p "$work/storage/org"
python3 - "$work/storage/org/big-1.0.0.tgz" "$SIZE_MB" <<'EOF'
import io, os, sys, tarfile
path, mib = sys.argv[1], int(sys.argv[2])
with tarfile.open(path, "w:gz", compresslevel=1) as t:
    def add(name, data):
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = 0o644
        t.addfile(info, io.BytesIO(data))
    add("big/Chart.yaml", b"apiVersion: v2\nname: big\nversion: 1.0.0\n")
    add("big/blob.bin", os.urandom(mib << 20))
EOF
size=$(stat -c %s "$work/storage/org/big-1.0.0.tgz")

kib() { sed -n "s/^$1:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$server/status"; }

run() {
    label=$1 bin=$2
    start_server "$label" "$bin" "$work/out" "$work/err" --storage "$work/storage" --listen 127.0.0.1:0
    idle=$(kib VmRSS)
    start=$(date +%s.%N)
    pids=
    i=0
    while [ $i -lt "$CLIENTS" ]; do
        curl -s -o /dev/null -w '%{http_code} %{size_download}\n' --limit-rate "$RATE" \
            "http://$addr/org/charts/big-1.0.0.tgz" >"$work/curl.$i" &
        pids="$pids $!"
        i=$((i + 1))
    done
    peak=$idle
    while :; do
        running=0
        for p in $pids; do kill -0 "$p" 2>/dev/null && running=1; done
        rss=$(kib VmRSS)
        [ "$rss" -gt "$peak" ] && peak=$rss
        [ $running = 1 ] || break
        sleep 0.02
    done
    for p in $pids; do wait "$p" || true; done
    end=$(date +%s.%N)
    hwm=$(kib VmHWM)
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    ok=$(cat "$work"/curl.* | grep -c "^200 $size\$" || true)
    stop_server
    printf '| %s | %d | %d MiB | %d MiB | %d MiB | %.1f s | %s |\n' "$label" "$ok" \
        $((idle / 1024)) $((peak / 1024)) $((hwm / 1024)) "$(echo "$end - $start" | bc)" "$load"
}

echo "download-memory.sh: $CLIENTS clients at $RATE/s each, one package of $size bytes; $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "| server | downloads whole (of $CLIENTS) | VmRSS listening | VmRSS peak while downloading | VmHWM | wall time | load average after |"
echo "|---|---|---|---|---|---|---|"
round=1
while [ $round -le "$ROUNDS" ]; do
    for spec in "$@"; do
        run "${spec%%=*}, round $round" "${spec#*=}"
    done
    round=$((round + 1))
done
