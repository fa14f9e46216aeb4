#!/usr/bin/env bash
# Builds the fuzz targets and runs each for SECONDS (default 300), one
# after the other; prints per target the executions, executions per
# second, time, corpus size and crashes. Needs nightly (`rustup toolchain
# install nightly`) and cargo-fuzz (`cargo install cargo-fuzz`); git for
# ignore_vs_git. Targets to run: the arguments after SECONDS (all by
# default). Corpora grow in fuzz/corpus/TARGET (seeded from
# fuzz/seeds/TARGET), crashes land in fuzz/artifacts/TARGET.
set -uo pipefail
cd "$(dirname "$0")"
secs=${1:-300}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(ignore_vs_git spec_serde status_serde chart_parse chart_request read_form)
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1}
cargo +nightly fuzz build -a || exit 1
mkdir -p logs
summary=()
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "seeds/$t" "artifacts/$t"
    extra=()
    case $t in
        # A bounded parser allocates little; a header read whole does not.
        chart_parse) extra=(-malloc_limit_mb=32 -rss_limit_mb=1024) ;;
    esac
    [ -f "dicts/$t.dict" ] && extra+=("-dict=dicts/$t.dict")
    echo "== $t: ${secs}s"
    start=$(date +%s)
    touch "logs/$t.start"
    cargo +nightly fuzz run -a "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$secs" -print_final_stats=1 "${extra[@]}" >"logs/$t.log" 2>&1
    rc=$?
    end=$(date +%s)
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "logs/$t.log" | grep -o '[0-9]*$' | tail -1)
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "logs/$t.log" | grep -o '[0-9]*$' | tail -1)
    corpus=$(find "corpus/$t" -type f | wc -l)
    # Only this run's: artifacts of earlier runs stay until removed.
    crashes=$(find "artifacts/$t" -type f -newer "logs/$t.start" | wc -l)
    line="$t: ${execs:-?} execs, ${rate:-?}/s, $((end - start))s, corpus $corpus, crashes $crashes (exit $rc)"
    echo "$line"
    summary+=("$line")
done
echo "== summary (${secs}s per target)"
printf '%s\n' "${summary[@]}"
