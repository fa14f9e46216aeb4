#!/bin/sh
# A quick look at downloads and uploads from the outside, with curl, for
# each server binary given (`label=path`): on a storage of 4 small charts
# in tenant t0, started with `--allow-anonymous-write --max-upload-mb 1`,
# it prints per binary what came back for
#
# - `GET` with `Range: bytes=0-99` (status, Content-Range, body length,
#   and whether the body is the file's first 100 bytes);
# - `GET` with `If-None-Match: <the ETag of a GET>`;
# - `HEAD` (status, Content-Length), then whether the next answer on the
#   same connection starts right after its head (no body sent);
# - an upload declaring 2 MiB (curl --data-binary): status, bytes sent;
# - a chunked upload of up to 64 MiB, 64 KiB every 10 ms (upload_limit.py):
#   how much was sent when the answer came;
# - whether any `.upload-*` file is left in the storage.
#
#   chart-index/scripts/http-checks.sh before=BIN_A after=BIN_B
#
# Needs python3 and curl.
set -eu

[ $# -gt 0 ] || { echo "usage: $0 label=BINARY..." >&2; exit 2; }
here=$(dirname "$0")
. "$here/common.sh"
work=$(mktemp -d)
server=
cleanup() {
    stop_server
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

python3 "$here/replicas_load.py" seed "$work/storage" 4 1
pkg="$work/storage/t0/c0-1.0.0.tgz"
head -c 100 "$pkg" >"$work/first100"
head -c $((2 << 20)) /dev/zero >"$work/2MiB"

for spec in "$@"; do
    label=${spec%%=*} bin=${spec#*=}
    start_server "$label" "$bin" "$work/out" "$work/err" --storage "$work/storage" \
        --listen 127.0.0.1:0 --allow-anonymous-write --max-upload-mb 1
    url="http://$addr/t0/charts/c0-1.0.0.tgz"
    echo "## $label ($bin), $(stat -c %s "$pkg") bytes at $url"

    curl -s -o "$work/range" -D "$work/h" -H 'Range: bytes=0-99' "$url"
    same=no
    cmp -s "$work/range" "$work/first100" && same=yes
    range=$(grep -i '^content-range:' "$work/h" | tr -d '\r' || true)
    printf 'Range: bytes=0-99: %s; %s; %s body bytes, the first 100 of the file: %s\n' \
        "$(head -1 "$work/h" | tr -d '\r')" "${range:-no Content-Range}" \
        "$(wc -c <"$work/range")" "$same"

    etag=$(curl -s -o /dev/null -D - "$url" | sed -n 's/^[Ee][Tt][Aa][Gg]: *//p' | tr -d '\r')
    if [ -n "$etag" ]; then
        printf 'If-None-Match: %s: %s\n' "$etag" \
            "$(curl -s -o /dev/null -w '%{http_code}, %{size_download} body bytes' -H "If-None-Match: $etag" "$url")"
    else
        echo "If-None-Match: no ETag given"
    fi

    printf 'HEAD: %s; ' "$(curl -s -I "$url" | grep -i -e '^HTTP/' -e '^content-length:' | tr -d '\r' | paste -sd ';' -)"
    python3 - "$addr" <<'EOF'
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)))
s.sendall(b"HEAD /t0/charts/c0-1.0.0.tgz HTTP/1.1\r\nHost: x\r\n\r\n"
          b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
data = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    data += d
rest = data.split(b"\r\n\r\n", 1)[1]
print("the next answer follows its head at once: %s" % ("yes" if rest.startswith(b"HTTP/1.1 ") else "no (%r)" % rest[:20]))
EOF

    printf 'upload declaring 2 MiB: %s\n' "$(curl -s -o /dev/null -w '%{http_code}, %{size_upload} bytes sent' \
        -H 'Content-Type: application/gzip' --data-binary @"$work/2MiB" "http://$addr/api/t0/charts")"
    printf 'chunked upload: %s\n' "$(python3 "$here/upload_limit.py" "$addr" t0 64 0.01)"
    printf 'VmRSS %s, VmHWM %s\n' \
        "$(sed -n 's/^VmRSS:[[:space:]]*//p' "/proc/$server/status")" \
        "$(sed -n 's/^VmHWM:[[:space:]]*//p' "/proc/$server/status")"
    stop_server
    printf '.upload-* files left: %s\n\n' "$(find "$work/storage" -name '.upload-*' | wc -l)"
done
