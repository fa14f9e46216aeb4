#!/bin/bash
# Issue 23's load scenario for the chart-index server: two replicas over
# one storage directory of CHARTS charts in TENANTS tenants, replica A on
# the directory itself (native watching), replica B on a bindfs (FUSE)
# mount of it (Auto finds FUSE and polls every --poll-interval). For
# DURATION seconds:
#
# - oha asks `GET /<tenant>/index.yaml` (a random tenant per request) at
#   CONNS connections in all: half on A, half on B;
# - a writer, on A, uploads a new chart and deletes an old one in turn,
#   RATE operations per second, and measures for each the time from the
#   request to B's index.yaml showing it (listed, or no longer listed): it
#   waits for B's `index: + KEY` / `index: - KEY` line on stderr, then
#   asks B's index.yaml for that tenant until it shows the change, and
#   counts a miss after DEADLINE seconds.
#
# Memory per chart: each replica's VmRSS once it is listening, minus that
# of the same binary on an empty directory (local for A, a bindfs mount
# for B), divided by CHARTS.
#
#   chart-index/scripts/replicas-load.sh [LABEL=]BINARY...
#
# Each BINARY is a chart-index server (LABEL defaults to its path); with
# several, each round runs each in turn (before, after, before, after with
# ROUNDS=2), so drift in the machine's load hits all alike. A binary whose
# --help names --allow-anonymous-write gets it (writes are closed without
# it); older ones had open writes. Environment: CHARTS (10000), TENANTS
# (100), CONNS (64), DURATION (30, seconds), RATE (10), DEADLINE (10),
# ROUNDS (1), POLL_INTERVAL (B's --poll-interval in ms; unset: the
# server's default, 1000), OHA (oha; `cargo install oha`), KEEP=1 keeps
# the work directory. Needs bindfs, fusermount, python3. Prints a line
# per run, then tables in Markdown.
set -euo pipefail

CHARTS=${CHARTS:-10000}
TENANTS=${TENANTS:-100}
CONNS=${CONNS:-64}
DURATION=${DURATION:-30}
RATE=${RATE:-10}
DEADLINE=${DEADLINE:-10}
ROUNDS=${ROUNDS:-1}
POLL_INTERVAL=${POLL_INTERVAL:-}
OHA=${OHA:-oha}
here=$(cd "$(dirname "$0")" && pwd)

NAME=replicas-load
. "$here/binaries.sh"
binaries "$@"
for tool in "$OHA" bindfs fusermount python3; do
    command -v "$tool" >/dev/null || die "no $tool on PATH"
done
[ $((CHARTS / TENANTS)) -le 100 ] || die "at most 100 charts per tenant (10 names x 10 versions)"

work=$(mktemp -d)
servers=() mounts=()

# Stops every server still running, unmounts every mount (a lazy
# unmount, as the tests do), waits for its bindfs to exit, and removes
# the work directory (never across a mount that is still there).
cleanup() {
    local pid m i
    for pid in "${servers[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${servers[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    servers=()
    for m in "${mounts[@]}"; do
        fusermount -u -z "$m" 2>/dev/null || true
        for i in $(seq 50); do
            ps -eo args | grep -q "^bindfs .* $m\$" || break
            sleep 0.1
        done
    done
    mounts=()
    if [ "${KEEP:-0}" = 1 ]; then
        say "kept $work"
    elif grep -q " $work/" /proc/mounts; then
        say "a mount is still under $work: not removing it"
    else
        rm -rf --one-file-system "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bind() { # SRC MNT
    mkdir -p "$2"
    bindfs "$1" "$2" || die "bindfs $1 $2 failed"
    mounts+=("$2")
}

unbind() { # MNT
    local m=$1 i keep=()
    fusermount -u -z "$m"
    for i in $(seq 50); do
        ps -eo args | grep -q "^bindfs .* $m\$" || break
        sleep 0.1
    done
    for i in "${mounts[@]}"; do [ "$i" = "$m" ] || keep+=("$i"); done
    mounts=("${keep[@]+"${keep[@]}"}")
}

rss_kb() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status"; }

# start NAME BINARY STORAGE ARGS...: starts a server on a free port, waits
# for its LISTENING line (at most 300 s); sets pid, addr and took (ms).
start() {
    local name=$1 bin=$2 storage=$3 t0 tries=0
    shift 3
    t0=$(date +%s%N)
    # Made here: the server's own redirection may come after the first look.
    : >"$run/$name.out"
    "$bin" --storage "$storage" --listen 127.0.0.1:0 "$@" >"$run/$name.out" 2>"$run/$name.err" &
    pid=$!
    servers+=("$pid")
    addr=
    while [ -z "$addr" ]; do
        addr=$(sed -n 's|^LISTENING http://||p' "$run/$name.out")
        if [ -z "$addr" ]; then
            kill -0 "$pid" 2>/dev/null || { cat "$run/$name.err" >&2; die "$name exited"; }
            tries=$((tries + 1))
            [ $tries -lt 3000 ] || die "$name: no LISTENING line within 300 s"
            sleep 0.1
        fi
    done
    took=$((($(date +%s%N) - t0) / 1000000))
}

# stop PID: SIGTERM, then waits for it.
stop() {
    local p keep=()
    kill -TERM "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    for p in "${servers[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
    servers=("${keep[@]+"${keep[@]}"}")
}

# The packages: tenant t<i % TENANTS> holds chart c<n/10> version
# 1.0.<n%10>, n = i / TENANTS (as load.sh makes them).
say "making $CHARTS charts in $TENANTS tenants"
python3 "$here/replicas_load.py" seed "$work/seed" "$CHARTS" "$TENANTS"
mkdir -p "$work/empty" "$work/empty-src"

tenant_re=$(seq -s '|' 0 $((TENANTS - 1)))
url_re() { printf 'http://%s/t(%s)/index[.]yaml' "$(printf '%s' "$1" | sed 's/[.]/[.]/g')" "$tenant_re"; }
b_flags=()
[ -z "$POLL_INTERVAL" ] || b_flags=(--poll-interval "$POLL_INTERVAL")

n=0
for round in $(seq "$ROUNDS"); do
    for k in "${!bins[@]}"; do
        label=${labels[$k]} bin=${bins[$k]}
        n=$((n + 1))
        run=$work/run$n
        mkdir -p "$run"
        a_flags=()
        case $("$bin" --help 2>&1 || true) in
            *--allow-anonymous-write*) a_flags=(--allow-anonymous-write) ;;
        esac
        say "round $round: $label: load $(cut -d' ' -f1-3 /proc/loadavg)"

        # Empty replicas, for the memory baseline.
        start empty-local "$bin" "$work/empty"
        rss_empty_a=$(rss_kb "$pid")
        stop "$pid"
        bind "$work/empty-src" "$work/empty-mnt"
        start empty-fuse "$bin" "$work/empty-mnt" "${b_flags[@]+"${b_flags[@]}"}"
        rss_empty_b=$(rss_kb "$pid")
        stop "$pid"
        unbind "$work/empty-mnt"

        rm -rf --one-file-system "$work/storage"
        cp -a "$work/seed" "$work/storage"
        bind "$work/storage" "$work/mnt"
        start a "$bin" "$work/storage" "${a_flags[@]+"${a_flags[@]}"}"
        a_pid=$pid a_addr=$addr a_start=$took
        start b "$bin" "$work/mnt" "${b_flags[@]+"${b_flags[@]}"}"
        b_pid=$pid b_addr=$addr b_start=$took
        a_rss=$(rss_kb "$a_pid") b_rss=$(rss_kb "$b_pid")
        say "  A $a_addr (${a_start} ms to LISTENING, $a_rss kB), B $b_addr (${b_start} ms, $b_rss kB): $(sed -n 's/.*chart_index: root: //p' "$run/b.err" | head -1)"

        load_before=$(cut -d' ' -f1-3 /proc/loadavg)
        python3 "$here/replicas_load.py" write "$a_addr" "$b_addr" "$run/b.err" \
            "$DURATION" "$RATE" "$DEADLINE" "$TENANTS" "$run/writer.json" &
        writer=$!
        "$OHA" --no-tui -c $((CONNS / 2)) -z "${DURATION}s" --output-format json \
            -o "$run/oha-a.json" --rand-regex-url "$(url_re "$a_addr")" &
        oha_a=$!
        "$OHA" --no-tui -c $((CONNS - CONNS / 2)) -z "${DURATION}s" --output-format json \
            -o "$run/oha-b.json" --rand-regex-url "$(url_re "$b_addr")" &
        oha_b=$!
        sleep $((DURATION / 2))
        load_during=$(cut -d' ' -f1-3 /proc/loadavg)
        wait $oha_a $oha_b
        wait $writer
        a_rss_end=$(rss_kb "$a_pid") b_rss_end=$(rss_kb "$b_pid")
        stop "$a_pid"
        stop "$b_pid"
        unbind "$work/mnt"

        cat >"$run/run.json" <<EOF
{"label": "$label", "round": $round, "charts": $CHARTS, "tenants": $TENANTS,
 "conns": $CONNS, "duration": $DURATION, "rate": $RATE,
 "poll_interval": "${POLL_INTERVAL:-default}",
 "b_root": $(sed -n 's/.*chart_index: root: //p' "$run/b.err" | head -1 | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().strip()))'),
 "load_before": "$load_before", "load_during": "$load_during",
 "load_after": "$(cut -d' ' -f1-3 /proc/loadavg)",
 "start_ms": {"a": $a_start, "b": $b_start},
 "rss_kb": {"a": $a_rss, "b": $b_rss, "a_end": $a_rss_end, "b_end": $b_rss_end,
            "empty_a": $rss_empty_a, "empty_b": $rss_empty_b}}
EOF
        python3 "$here/replicas_load.py" line "$run"
    done
done
python3 "$here/replicas_load.py" report "$work"/run*
