# Sourced by replicas-load.sh and restart-bench.sh (bash): their
# `[LABEL=]BINARY...` arguments and their messages.
#
#   NAME=replicas-load; . "$here/binaries.sh"; binaries "$@"
#
# say and die print `NAME: ...` on stderr (die then exits 1); binaries
# reads its arguments into the arrays `labels` and `bins` (LABEL
# defaulting to the path), and dies on none or on one that is not an
# executable file.

say() { echo "$NAME: $*" >&2; }
die() { say "$*"; exit 1; }

binaries() {
    [ $# -gt 0 ] || die "usage: $0 [LABEL=]BINARY... (cargo build --release -p chart-index)"
    labels=() bins=()
    local arg b
    for arg in "$@"; do
        case $arg in
            *=*) labels+=("${arg%%=*}") bins+=("${arg#*=}") ;;
            *) labels+=("$arg") bins+=("$arg") ;;
        esac
    done
    for b in "${bins[@]}"; do [ -x "$b" ] || die "no server binary at $b"; done
}
