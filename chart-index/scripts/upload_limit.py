"""When an upload past the size limit is refused: sends `POST
/api/<tenant>/charts` with a chunked body (no Content-Length, so the server
can only count) of up to TOTAL_MIB MiB in 64 KiB chunks, one every PACE
seconds, and prints how much had been sent when the answer came, how long
that took, and the answer's status line and body.

    python3 upload_limit.py HOST:PORT TENANT TOTAL_MIB PACE

A server that counts as bytes arrive answers once the limit is passed
(plus what the sockets hold); one that buffers first answers after the
whole body.
"""

import select
import socket
import sys
import time


def main():
    addr, tenant, total, pace = sys.argv[1], sys.argv[2], int(sys.argv[3]) << 20, float(sys.argv[4])
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    s.sendall(
        (
            f"POST /api/{tenant}/charts HTTP/1.1\r\nHost: {addr}\r\n"
            "Content-Type: application/gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
        ).encode()
    )
    chunk = b"%x\r\n" % 65536 + b"\0" * 65536 + b"\r\n"
    sent, answer, start = 0, b"", time.monotonic()
    while not answer:
        readable, writable, _ = select.select([s], [s] if sent < total else [], [], 30)
        if readable:
            answer = s.recv(65536)
        elif writable:
            s.sendall(chunk)
            sent += 65536
            if sent >= total:
                s.sendall(b"0\r\n\r\n")
            time.sleep(pace)
        else:
            sys.exit("upload_limit.py: no answer within 30 s")
    took = time.monotonic() - start
    head, _, body = answer.partition(b"\r\n\r\n")
    print(
        "sent %.2f MiB (of %d) when the answer came after %.2f s: %s %s"
        % (sent / 2**20, total >> 20, took, head.split(b"\r\n")[0].decode(), body.decode().strip())
    )


if __name__ == "__main__":
    main()
