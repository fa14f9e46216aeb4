# Shared by load.sh and download-memory.sh (sourced; POSIX sh).

# start_server LABEL BINARY OUT ERR ARGS...: starts BINARY ARGS... with
# stdout to OUT and stderr to ERR, and waits (at most 120 s) for its
# LISTENING line; sets `server` (its pid) and `addr` (HOST:PORT). Exits
# saying why if it ends or never listens.
start_server() {
    _label=$1 _bin=$2 _out=$3 _err=$4
    shift 4
    : >"$_out" # before the server's own redirection, which may come late
    "$_bin" "$@" >"$_out" 2>"$_err" &
    server=$!
    addr=
    _tries=0
    while [ -z "$addr" ]; do
        addr=$(sed -n 's|^LISTENING http://||p' "$_out")
        if [ -z "$addr" ]; then
            kill -0 "$server" 2>/dev/null || {
                echo "$_label: the server exited:" >&2
                cat "$_err" >&2
                exit 1
            }
            _tries=$((_tries + 1))
            [ $_tries -lt 1200 ] || { echo "$_label: no LISTENING line within 120 s" >&2; exit 1; }
            sleep 0.1
        fi
    done
}

# stop_server: SIGTERM to `server`, and waits for it.
stop_server() {
    if [ -n "${server:-}" ]; then
        kill -TERM "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
        server=
    fi
}
