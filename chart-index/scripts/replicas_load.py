"""The Python half of replicas-load.sh and restart-bench.sh (standard
library only).

    replicas_load.py seed DIR CHARTS TENANTS
        makes the chart packages (as load.sh does)
    replicas_load.py change DIR N TENANTS MARK
        rewrites the first N seeded packages in place, their description
        ending in MARK (so that each gets a new digest)
    replicas_load.py start BINARY ARGS...
        starts a server, times it from the start to its LISTENING line,
        stops it (SIGTERM), waits for it to exit, and prints one JSON line:
        {"ms", "indexed", "read", "cached", "hashed"} (a server that says
        no `chart_index: start:` line read every package it indexed)
    replicas_load.py write A_ADDR B_ADDR B_STDERR DURATION RATE DEADLINE TENANTS OUT
        the writer: uploads and deletes on A at RATE per second for DURATION
        seconds, and measures when B's index shows each change
    replicas_load.py line RUN_DIR
        one line on a run
    replicas_load.py report RUN_DIR...
        the tables, in Markdown
"""

import http.client
import io
import json
import math
import os
import re
import sys
import tarfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor


def package(name, version, mark=""):
    """A chart package: Chart.yaml, values.yaml, one template."""

    def add(tar, path, data):
        info = tarfile.TarInfo(path)
        info.size, info.mode, info.mtime = len(data), 0o644, 1700000000
        tar.addfile(info, io.BytesIO(data))

    chart_yaml = (
        'apiVersion: v2\nname: %s\nversion: %s\nappVersion: "%s"\n'
        "description: load test chart %s%s\ntype: application\n"
        % (name, version, version, name, mark)
    ).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        add(tar, name + "/Chart.yaml", chart_yaml)
        add(tar, name + "/values.yaml", b"replicas: 1\n")
        add(
            tar,
            name + "/templates/configmap.yaml",
            b"kind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n",
        )
    return buf.getvalue()


def seed_chart(i, tenants):
    """Tenant, name and version of the i-th seeded package."""
    n = i // tenants
    return "t%d" % (i % tenants), "c%d" % (n // 10), "1.0.%d" % (n % 10)


def seed(root, charts, tenants):
    for i in range(charts):
        tenant, name, version = seed_chart(i, tenants)
        os.makedirs(os.path.join(root, tenant), exist_ok=True)
        path = os.path.join(root, tenant, "%s-%s.tgz" % (name, version))
        with open(path, "wb") as f:
            f.write(package(name, version))


def change(root, n, tenants, mark):
    for i in range(n):
        tenant, name, version = seed_chart(i, tenants)
        path = os.path.join(root, tenant, "%s-%s.tgz" % (name, version))
        with open(path, "wb") as f:
            f.write(package(name, version, " " + mark))


# A log line's message: what follows the time and the level (and the
# request span's name) of the server's log lines, `2026-12-07T19:14:20.479474Z
#  INFO index: + KEY (NAME VERSION)`; a line of an older server, which had
# neither, as it is.
LOG_PREFIX = re.compile(r"^\d\S*Z\s+(?:TRACE|DEBUG|INFO|WARN|ERROR)\s+(?:request: )?")


def message(line):
    return LOG_PREFIX.sub("", line, count=1)


START_RE = re.compile(
    r"^chart_index: start: (\d+) packages indexed: (\d+) from the cache, "
    r"(\d+) read \((\d+) of them only hashed\)"
)


def start(argv):
    import signal
    import subprocess
    import tempfile

    with tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err)
        line = p.stdout.readline().decode()
        ms = (time.monotonic() - t0) * 1000
        if not line.startswith("LISTENING "):
            p.kill()
            p.wait()
            err.seek(0)
            sys.exit("no LISTENING line: %r\n%s" % (line, err.read().decode()))
        p.send_signal(signal.SIGTERM)
        p.stdout.read()
        if p.wait(timeout=120) != 0:
            sys.exit("the server exited with %s" % p.returncode)
        err.seek(0)
        lines = [message(l) for l in err.read().decode().splitlines()]
    run = {"ms": round(ms, 1)}
    for l in lines:
        m = START_RE.match(l)
        if m:
            run.update(
                indexed=int(m[1]), cached=int(m[2]), read=int(m[3]), hashed=int(m[4])
            )
            break
    else:
        # Up to its LISTENING line, each package was read ("index: +") or
        # could not be ("skip").
        added = sum(1 for l in lines if l.startswith("index: + "))
        run.update(indexed=added, cached=0, hashed=0,
                   read=added + sum(1 for l in lines if l.startswith("skip ")))
    print(json.dumps(run))


def request(addr, method, path, body=None):
    """One request on a new connection: (status, body), or (None, why)."""
    host, port = addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        headers = {"Connection": "close"}
        if body is not None:
            headers["Content-Type"] = "application/gzip"
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    except (OSError, http.client.HTTPException) as e:
        return None, str(e).encode()
    finally:
        conn.close()


class Tail:
    """B's stderr, read as it grows: when each `index: + KEY` and
    `index: - KEY` line first appeared."""

    LINE = re.compile(r"^index: ([+-]) (\S+)")

    def __init__(self, path):
        self.f = open(path, "rb")
        self.f.seek(0, os.SEEK_END)
        self.seen = {}
        self.lock = threading.Lock()
        self.done = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        partial = b""
        while not self.done:
            chunk = self.f.readline()
            if not chunk:
                time.sleep(0.002)
                continue
            partial += chunk
            if not partial.endswith(b"\n"):
                continue
            line, partial = partial.decode(errors="replace"), b""
            m = self.LINE.match(message(line))
            if m:
                with self.lock:
                    self.seen.setdefault((m.group(1), m.group(2)), time.monotonic())

    def when(self, sign, key):
        with self.lock:
            return self.seen.get((sign, key))


def write(a, b, b_err, duration, rate, deadline, tenants, out):
    """Uploads (even steps) and deletes (odd steps) on A, RATE a second;
    for each that A answers 2xx, waits for B's index to show it: B's stderr
    line first (cheap), then B's index.yaml of that tenant, asked until it
    shows the change; a miss after DEADLINE seconds from the answer."""
    tail = Tail(b_err)
    steps = int(duration * rate)
    uploads = [(j, "w%d" % j, "1.0.0") for j in range(steps // 2 + 1)]
    packages = {name: package(name, version) for _, name, version in uploads}
    results = []  # one dict per step
    pending = []  # steps answered 2xx, not yet seen on B
    lock = threading.Lock()

    def step(k):
        j = k // 2
        if k % 2 == 0:
            _, name, version = uploads[j]
            tenant = "t%d" % (j % tenants)
            t0 = time.monotonic()
            status, body = request(
                a, "POST", "/api/%s/charts" % tenant, packages[name]
            )
            sign = "+"
        else:
            tenant, name, version = seed_chart(j, tenants)
            t0 = time.monotonic()
            status, body = request(
                a, "DELETE", "/api/%s/charts/%s/%s" % (tenant, name, version)
            )
            sign = "-"
        answered = time.monotonic()
        r = {
            "op": "upload" if sign == "+" else "delete",
            "status": status,
            "answer_ms": (answered - t0) * 1000,
            "tenant": tenant,
            "file": "%s-%s.tgz" % (name, version),
            "sign": sign,
            "t0": t0,
            "answered": answered,
        }
        if status is None or status >= 300:
            r["error"] = body[:200].decode(errors="replace")
        with lock:
            results.append(r)
            if status is not None and 200 <= status < 300:
                pending.append(r)

    def check():
        """Until every step is done and every pending one seen or missed."""
        while True:
            with lock:
                todo = list(pending)
                finished = writing_done.is_set() and not todo
            if finished:
                return
            for r in todo:
                now = time.monotonic()
                key = "%s/%s" % (r["tenant"], r["file"])
                if tail.when(r["sign"], key) is not None:
                    status, body = request(b, "GET", "/%s/index.yaml" % r["tenant"])
                    listed = ("charts/" + r["file"]).encode() in (body or b"")
                    if status == 200 and listed == (r["sign"] == "+"):
                        shown = time.monotonic()
                        r["visible_ms"] = (shown - r["t0"]) * 1000
                        r["log_ms"] = (tail.when(r["sign"], key) - r["t0"]) * 1000
                        with lock:
                            pending.remove(r)
                        continue
                if now - r["answered"] > deadline:
                    r["missed"] = True
                    with lock:
                        pending.remove(r)
            time.sleep(0.002)

    writing_done = threading.Event()
    checker = threading.Thread(target=check)
    checker.start()
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=16) as pool:
        for k in range(steps):
            delay = start + k / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            pool.submit(step, k)
    writing_done.set()
    checker.join()
    tail.done = True
    for r in results:
        for t in ("t0", "answered"):
            del r[t]
    with open(out, "w") as f:
        json.dump({"took_s": time.monotonic() - start, "steps": results}, f)


def pct(values, p):
    """The p-th percentile (nearest rank) of values, or None."""
    if not values:
        return None
    v = sorted(values)
    return v[max(0, math.ceil(p / 100 * len(v)) - 1)]


def ms(x):
    if x is None:
        return "-"
    return "%.0f ms" % x if x >= 100 else "%.1f ms" % x


def summary(run):
    """One run's figures, from its files."""
    with open(os.path.join(run, "run.json")) as f:
        s = json.load(f)
    for side in ("a", "b"):
        with open(os.path.join(run, "oha-%s.json" % side)) as f:
            o = json.load(f)
        codes = o.get("statusCodeDistribution", {})
        errors = o.get("errorDistribution", {})
        deadline = sum(n for e, n in errors.items() if "deadline" in e)
        s["oha_" + side] = {
            "rps": o["summary"]["requestsPerSec"],
            "p50": o["latencyPercentiles"]["p50"] * 1000,
            "p99": o["latencyPercentiles"]["p99"] * 1000,
            "codes": codes,
            "deadline": deadline,
            "errors": {e: n for e, n in errors.items() if "deadline" not in e},
        }
    with open(os.path.join(run, "writer.json")) as f:
        w = json.load(f)
    for op in ("upload", "delete"):
        steps = [r for r in w["steps"] if r["op"] == op]
        ok = [r for r in steps if r["status"] is not None and 200 <= r["status"] < 300]
        bad = {}
        for r in steps:
            if r not in ok:
                why = str(r["status"]) if r["status"] else r.get("error", "?")[:60]
                bad[why] = bad.get(why, 0) + 1
        seen = [r["visible_ms"] for r in ok if "visible_ms" in r]
        logged = [r["log_ms"] for r in ok if "log_ms" in r]
        s[op] = {
            "n": len(steps),
            "ok": len(ok),
            "failed": bad,
            "answer_p50": pct([r["answer_ms"] for r in ok], 50),
            "answer_p99": pct([r["answer_ms"] for r in ok], 99),
            "visible_p50": pct(seen, 50),
            "visible_p99": pct(seen, 99),
            "visible_max": max(seen) if seen else None,
            "logged_p50": pct(logged, 50),
            "logged_p99": pct(logged, 99),
            "missed": sum(1 for r in ok if r.get("missed")),
        }
    rss = s["rss_kb"]
    s["bytes_per_chart"] = {
        side + when: (rss[side + when] - rss["empty_" + side]) * 1024 / s["charts"]
        for side in ("a", "b")
        for when in ("", "_end")
    }
    return s


def line(run):
    s = summary(run)
    a, b, u = s["oha_a"], s["oha_b"], s["upload"]
    print(
        "replicas-load: %s: A %.0f req/s p99 %s, B %.0f req/s p99 %s; upload -> B "
        "p50 %s p99 %s, %d missed; load %s"
        % (
            s["label"],
            a["rps"],
            ms(a["p99"]),
            b["rps"],
            ms(b["p99"]),
            ms(u["visible_p50"]),
            ms(u["visible_p99"]),
            u["missed"],
            s["load_during"],
        ),
        file=sys.stderr,
    )


def codes_text(o):
    parts = ["%s x %s" % (n, c) for c, n in sorted(o["codes"].items())]
    parts += ["%s x %s" % (n, e) for e, n in sorted(o["errors"].items())]
    return ", ".join(parts) or "none"


def report(runs):
    rows = [summary(r) for r in runs]
    first = rows[0]
    print(
        "%d charts in %d tenants; oha -c %d (half on A, half on B) for %d s; "
        "%d writes/s on A; B's --poll-interval: %s\n"
        % (
            first["charts"],
            first["tenants"],
            first["conns"],
            first["duration"],
            first["rate"],
            first["poll_interval"],
        )
    )
    print("| run | replica | requests/s | p50 | p99 | answers | cut at the end | load (1, 5, 15 min) |")
    print("|---|---|---|---|---|---|---|---|")
    for s in rows:
        for side, name in (("a", "A (native)"), ("b", "B (bindfs, polled)")):
            o = s["oha_" + side]
            print(
                "| %s, round %d | %s | %s | %s | %s | %s | %d | %s |"
                % (
                    s["label"],
                    s["round"],
                    name,
                    "{:,.0f}".format(o["rps"]),
                    ms(o["p50"]),
                    ms(o["p99"]),
                    codes_text(o),
                    o["deadline"],
                    s["load_during"],
                )
            )
    print()
    print(
        "| run | uploads ok | upload answered p50 / p99 | upload -> applied by B (its log "
        "line) p50 / p99 | upload -> listed by B's index.yaml p50 / p99 / max | missed "
        "| deletes ok | delete -> gone from B's index.yaml p50 / p99 | failed writes |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for s in rows:
        u, d = s["upload"], s["delete"]
        failed = dict(u["failed"])
        for k, n in d["failed"].items():
            failed[k] = failed.get(k, 0) + n
        print(
            "| %s, round %d | %d/%d | %s / %s | %s / %s | %s / %s / %s | %d | %d/%d | %s / %s "
            "| %s |"
            % (
                s["label"],
                s["round"],
                u["ok"],
                u["n"],
                ms(u["answer_p50"]),
                ms(u["answer_p99"]),
                ms(u["logged_p50"]),
                ms(u["logged_p99"]),
                ms(u["visible_p50"]),
                ms(u["visible_p99"]),
                ms(u["visible_max"]),
                u["missed"] + d["missed"],
                d["ok"],
                d["n"],
                ms(d["visible_p50"]),
                ms(d["visible_p99"]),
                ", ".join("%d x %s" % (n, k) for k, n in sorted(failed.items())) or "none",
            )
        )
    print()
    print(
        "| run | memory per chart, A / B, once listening | after the load | empty replica "
        "A / B | start (to LISTENING) A / B |"
    )
    print("|---|---|---|---|---|")
    for s in rows:
        b, rss = s["bytes_per_chart"], s["rss_kb"]
        print(
            "| %s, round %d | %.0f / %.0f B | %.0f / %.0f B | %.1f / %.1f MiB | %.1f / %.1f s |"
            % (
                s["label"],
                s["round"],
                b["a"],
                b["b"],
                b["a_end"],
                b["b_end"],
                rss["empty_a"] / 1024,
                rss["empty_b"] / 1024,
                s["start_ms"]["a"] / 1000,
                s["start_ms"]["b"] / 1000,
            )
        )


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "seed":
        seed(argv[2], int(argv[3]), int(argv[4]))
    elif cmd == "change":
        change(argv[2], int(argv[3]), int(argv[4]), argv[5])
    elif cmd == "start":
        start(argv[2:])
    elif cmd == "write":
        a, b, b_err = argv[2:5]
        duration, rate, deadline = float(argv[5]), float(argv[6]), float(argv[7])
        write(a, b, b_err, duration, rate, deadline, int(argv[8]), argv[9])
    elif cmd == "line":
        line(argv[2])
    elif cmd == "report":
        report(argv[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
