#!/bin/bash
# Start-up figures for the chart-index server: the time from the
# process's start to its LISTENING line, and how many packages it read,
# over a storage directory of CHARTS charts in TENANTS tenants:
#
#   cold       a first start (no restart cache yet)
#   unchanged  a restart, nothing changed since the last stop
#   changed    a restart after CHANGED packages were rewritten while it
#              was down (each with a new digest)
#
#   cargo build --release -p chart-index
#   chart-index/scripts/restart-bench.sh [LABEL=]BINARY...
#
# Each BINARY runs the three starts in turn, with a cache directory of
# its own (`--cache-dir`, new for each binary) if its --help names the
# flag; without it, every start reads every package. ROUNDS=2 runs them
# all twice (before, after, before, after). Every start is stopped with
# SIGTERM once it is listening, and waited for (a graceful stop saves
# the cache). Each start is preceded by 3 s without changes: a package
# read less than 2 s after its last change is only trusted after a hash
# at the next start (see the `cache` module), and a change "while it was
# down" is one made before then. The storage is on the local disk, in
# the OS's page cache (it has just been written). Environment: CHARTS
# (10000), TENANTS (100), CHANGED (100), ROUNDS (1), KEEP=1 keeps the
# work directory. Needs python3 (replicas_load.py makes the packages and
# times the starts). Prints a line per start, then a Markdown table.
set -euo pipefail

CHARTS=${CHARTS:-10000}
TENANTS=${TENANTS:-100}
CHANGED=${CHANGED:-100}
ROUNDS=${ROUNDS:-1}
here=$(cd "$(dirname "$0")" && pwd)
py="$here/replicas_load.py"

NAME=restart-bench
. "$here/binaries.sh"
binaries "$@"
command -v python3 >/dev/null || die "no python3 on PATH"
[ "$CHANGED" -le "$CHARTS" ] || die "CHANGED ($CHANGED) is more than CHARTS ($CHARTS)"

work=$(mktemp -d)
cleanup() {
    if [ "${KEEP:-0}" = 1 ]; then say "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT INT TERM

say "making $CHARTS charts in $TENANTS tenants"
python3 "$py" seed "$work/storage" "$CHARTS" "$TENANTS"
results="$work/results"
: >"$results"
mark=0
for round in $(seq "$ROUNDS"); do
    for i in "${!bins[@]}"; do
        bin=${bins[$i]} label=${labels[$i]}
        args=(--storage "$work/storage" --listen 127.0.0.1:0)
        case $("$bin" --help 2>&1 || true) in
            *--cache-dir*)
                rm -rf "$work/cache"
                args+=(--cache-dir "$work/cache")
                ;;
        esac
        for start in cold unchanged changed; do
            if [ "$start" = changed ]; then
                mark=$((mark + 1))
                python3 "$py" change "$work/storage" "$CHANGED" "$TENANTS" "change-$mark"
            fi
            sleep 3
            run=$(python3 "$py" start "$bin" "${args[@]}")
            say "round $round, $label, $start: $run"
            printf '%s\t%s\t%s\t%s\n' "$round" "$label" "$start" "$run" >>"$results"
        done
    done
done

python3 - "$results" "$CHARTS" "$TENANTS" "$CHANGED" <<'EOF'
import json, sys
path, charts, tenants, changed = sys.argv[1:]
print("| %s charts in %s tenants | start to LISTENING | packages read (of them only hashed) | from the cache |"
      % (format(int(charts), ","), tenants))
print("|---|---|---|---|")
names = {"cold": "first start (cold)", "unchanged": "restart, nothing changed",
         "changed": "restart, %s changed" % changed}
for line in open(path):
    rnd, label, start, run = line.rstrip("\n").split("\t")
    r = json.loads(run)
    print("| %s, %s, round %s | %s ms | %s (%s) | %s |" % (
        label, names[start], rnd, format(round(r["ms"]), ","),
        format(r["read"], ","), r["hashed"], format(r["cached"], ",")))
EOF
