#!/usr/bin/env python3
"""Replicas through Redis (--feed, issue 33), measured: servers as
processes, each on its own bindfs mount of one storage directory (as hosts
on NFS), and a redis-server of the script's own on a free loopback port.

    chart-index/scripts/feed-bench.py BINARY [visible|failover|cold]...

- visible: REPLICAS (4) replicas; UPLOADS (100) uploads, through each
  replica in turn, each a new chart; for each, the time from the upload's
  request to each OTHER replica listing it (`GET
  /api/<tenant>/charts/<name>/<version>` asked until 200, on every other
  replica at once): p50/p99/max. Then the same without --feed (each
  replica polling its mount every POLL_INTERVAL ms, default 1000; BASE
  uploads, default 30): the figure before. With LOAD=1, oha asks
  index.yaml at CONNS (64) connections spread over the replicas meanwhile.
- failover: REPLICAS replicas; ROUNDS (5) times: SIGKILL the watcher, and
  the time until another says it watches (`/ready`'s role, asked every
  5 ms); a replica is started again on the dead one's mount. With LOAD=1,
  under oha's load as above.
- cold: CHARTS (10000) charts in TENANTS (100) tenants; a first replica
  with --feed (which reads every package and puts the snapshot), then
  ROUNDS times each: a replica with --feed started on another mount (from
  the snapshot) and a server without --feed (a cold walk), timed from the
  start to LISTENING.

Prints one line per figure and the Markdown rows. Needs redis-server,
bindfs, fusermount (and oha for LOAD=1). Standard library only.
"""

import http.client
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replicas_load import message, package, seed  # noqa: E402

REPLICAS = int(os.environ.get("REPLICAS", "4"))
UPLOADS = int(os.environ.get("UPLOADS", "100"))
BASE = int(os.environ.get("BASE", "30"))
ROUNDS = int(os.environ.get("ROUNDS", "5"))
CHARTS = int(os.environ.get("CHARTS", "10000"))
TENANTS = int(os.environ.get("TENANTS", "100"))
POLL = os.environ.get("POLL_INTERVAL", "1000")
LOAD = os.environ.get("LOAD") == "1"
CONNS = int(os.environ.get("CONNS", "64"))
WAIT = 60.0


def say(*a):
    print("feed-bench:", *a, file=sys.stderr, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get(addr, path):
    c = http.client.HTTPConnection(addr, timeout=30)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def post(addr, path, body):
    c = http.client.HTTPConnection(addr, timeout=60)
    try:
        c.request("POST", path, body=body)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


class Work:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="feed-bench-")
        self.src = os.path.join(self.dir, "storage")
        os.mkdir(self.src)
        self.mounts = []
        self.servers = []
        self.redis = None
        self.redis_port = free_port()

    def start_redis(self):
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--protected-mode", "no",
             "--loglevel", "warning", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + WAIT
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.redis_port), 1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(7) == b"+PONG\r\n":
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                sys.exit("redis-server did not answer")
            time.sleep(0.01)

    def flush_redis(self):
        with socket.create_connection(("127.0.0.1", self.redis_port), 1) as s:
            s.sendall(b"FLUSHALL\r\n")
            s.recv(5)

    def url(self):
        return "redis://127.0.0.1:%d/" % self.redis_port

    def mount(self):
        m = os.path.join(self.dir, "mnt%d" % len(self.mounts))
        os.mkdir(m)
        subprocess.run(["bindfs", self.src, m], check=True)
        self.mounts.append(m)
        return m

    def cleanup(self):
        for s in self.servers:
            s.stop()
        if self.redis:
            self.redis.kill()
            self.redis.wait()
        for m in self.mounts:
            subprocess.run(["fusermount", "-u", "-z", m], stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        subprocess.run(["rm", "-rf", self.dir])


class Server:
    def __init__(self, work, binary, storage, args, label):
        self.label = label
        self.storage = storage
        self.err_path = os.path.join(work.dir, "%s-%d.err" % (label, len(work.servers)))
        self.err = open(self.err_path, "wb")
        self.t0 = time.monotonic()
        self.p = subprocess.Popen(
            [binary, "--storage", storage, "--listen", "127.0.0.1:0",
             "--allow-anonymous-write"] + args,
            stdout=subprocess.PIPE, stderr=self.err)
        line = self.p.stdout.readline().decode()
        self.ms = (time.monotonic() - self.t0) * 1000
        if not line.startswith("LISTENING "):
            sys.exit("%s: no LISTENING line: %r (%s)" % (label, line, self.err_path))
        self.addr = line.split("://", 1)[1].strip()
        work.servers.append(self)

    def lines(self):
        with open(self.err_path, "rb") as f:
            return [message(l) for l in f.read().decode(errors="replace").splitlines()]

    def wait_line(self, prefix, after=0):
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            ls = self.lines()
            for l in ls[after:]:
                if l.startswith(prefix):
                    return l
            time.sleep(0.05)
        sys.exit("%s: no line %r within %ss (%s)" % (self.label, prefix, WAIT, self.err_path))

    def ready(self):
        try:
            status, body = get(self.addr, "/ready")
            return status, json.loads(body)
        except (OSError, ValueError):
            return None, {}

    def kill(self):
        self.p.kill()
        self.p.wait()

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(p / 100 * len(v) + 0.5)) - 1))]


def row(label, values):
    return "%s: n=%d p50 %.1f ms, p99 %.1f ms, max %.1f ms" % (
        label, len(values), pct(values, 50), pct(values, 99), max(values))


def watcher(servers, deadline_s=WAIT):
    """The one replica watching, once every other one follows."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        roles = [s.ready()[1].get("role") for s in servers]
        if roles.count("watching") == 1 and roles.count("following") == len(servers) - 1:
            return servers[roles.index("watching")]
        time.sleep(0.005)
    sys.exit("no single watcher: %s" % [s.ready() for s in servers])


def listed_everywhere(writer, servers, tenant, name, version, t0):
    """Times from t0 to each other replica listing the chart."""
    out = []
    path = "/api/%s/charts/%s/%s" % (tenant, name, version)

    def wait(s):
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            if get(s.addr, path)[0] == 200:
                took = (time.monotonic() - t0) * 1000
                out.append(took)
                if took > 100:
                    say("slow: %s -> %s (%s): %.0f ms" % (
                        writer.label, s.label, s.ready()[1].get("role"), took))
                return
        out.append(float("inf"))

    ts = [threading.Thread(target=wait, args=(s,)) for s in servers if s is not writer]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def upload_round(servers, n, mark):
    """Times from each upload's request to each other replica listing it,
    from its answer to that, and of the answer itself."""
    lat, after, answers = [], [], []
    for k in range(n):
        writer = servers[k % len(servers)]
        tenant, name, version = "t%d" % (k % 10), "%s%d" % (mark, k), "1.0.0"
        body = package(name, version)
        t0 = time.monotonic()
        status, text = post(writer.addr, "/api/%s/charts" % tenant, body)
        answered = time.monotonic()
        answers.append((answered - t0) * 1000)
        if status != 201 or b'"indexed":true' not in text:
            sys.exit("%s: upload %s: %s %s" % (writer.label, name, status, text))
        took = listed_everywhere(writer, servers, tenant, name, version, t0)
        lat += took
        after += [t - answers[-1] for t in took]
    return lat, after, answers


def oha(servers):
    if not LOAD:
        return None
    per = max(1, CONNS // len(servers))
    return [subprocess.Popen(
        ["oha", "--no-tui", "-z", "3600s", "-c", str(per),
         "http://%s/t%d/index.yaml" % (s.addr, i % 10)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i, s in enumerate(servers)]


def stop_oha(procs):
    for p in procs or []:
        p.kill()
        p.wait()


def visible(binary):
    work = Work()
    try:
        work.start_redis()
        for i in range(10):
            os.makedirs(os.path.join(work.src, "t%d" % i))
        feed = ["--feed", work.url(), "--feed-name", "bench", "--poll-interval", POLL]
        servers = [Server(work, binary, work.mount(), feed, "r%d" % i) for i in range(REPLICAS)]
        watcher(servers)
        load = oha(servers)
        lat, after, answers = upload_round(servers, UPLOADS, "f")
        stop_oha(load)
        under = ", under load" if LOAD else ""
        print(row("with --feed: upload request -> listed on every other replica (%d replicas%s)"
                  % (REPLICAS, under), lat))
        print(row("with --feed: upload answered -> listed on every other replica", after))
        print(row("with --feed: the upload's answer (read-your-writes included)", answers))
        for s in servers:
            s.stop()
        work.servers = []
        servers = [Server(work, binary, m, ["--poll-interval", POLL], "p%d" % i)
                   for i, m in enumerate(work.mounts)]
        load = oha(servers)
        lat, after, answers = upload_round(servers, BASE, "p")
        stop_oha(load)
        print(row("without --feed (each polls every %s ms): upload request -> listed on every "
                  "other replica (%d replicas%s)" % (POLL, REPLICAS, under), lat))
        print(row("without --feed: upload answered -> listed on every other replica", after))
        print(row("without --feed: the upload's answer (read-your-writes included)", answers))
    finally:
        work.cleanup()


def failover(binary):
    work = Work()
    try:
        work.start_redis()
        feed = ["--feed", work.url(), "--feed-name", "bench", "--poll-interval", POLL]
        servers = [Server(work, binary, work.mount(), feed, "r%d" % i) for i in range(REPLICAS)]
        times = []
        load = None
        for r in range(ROUNDS):
            stop_oha(load)
            load = oha(servers)
            w = watcher(servers)
            others = [s for s in servers if s is not w]
            t0 = time.monotonic()
            w.kill()
            nw = watcher(others)
            times.append((time.monotonic() - t0) * 1000)
            say("round %d: %s killed, %s watching after %.0f ms" % (r, w.label, nw.label, times[-1]))
            servers = others + [Server(work, binary, w.storage, feed, "r%d" % (REPLICAS + r))]
        stop_oha(load)
        print(row("failover: SIGKILL of the watcher -> another watching (%d replicas, lease 3 s%s)"
                  % (REPLICAS, ", under load" if LOAD else ""), times))
    finally:
        work.cleanup()


def cold(binary):
    work = Work()
    try:
        work.start_redis()
        t = time.monotonic()
        seed(work.src, CHARTS, TENANTS)
        say("seeded %d charts in %.0f s" % (CHARTS, time.monotonic() - t))
        feed = ["--feed", work.url(), "--feed-name", "bench", "--poll-interval", POLL]
        first = Server(work, binary, work.mount(), feed, "first")
        first.wait_line("feed: snapshot put at seq")
        print("cold: the first replica with --feed (no snapshot: reads every package): %.0f ms"
              % first.ms)
        m_feed, m_walk = work.mount(), work.mount()
        snap, walk = [], []
        for r in range(ROUNDS):
            s = Server(work, binary, m_feed, feed, "snap%d" % r)
            start = s.wait_line("chart_index: start:")
            if " 0 read " not in start:
                sys.exit("the replica did not start from the snapshot: %s" % start)
            snap.append(s.ms)
            s.stop()
            work.servers.remove(s)
            s = Server(work, binary, m_walk, ["--poll-interval", POLL], "walk%d" % r)
            walk.append(s.ms)
            s.stop()
            work.servers.remove(s)
            say("round %d: from the snapshot %.0f ms, cold walk %.0f ms" % (r, snap[-1], walk[-1]))
        print(row("cold start to LISTENING at %d charts, --feed from the snapshot" % CHARTS, snap))
        print(row("cold start to LISTENING at %d charts, no feed (a cold walk)" % CHARTS, walk))
    finally:
        work.cleanup()


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    binary = os.path.abspath(argv[1])
    what = argv[2:] or ["visible", "failover", "cold"]
    print("feed-bench: %s, %s, load average before: %s" % (
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), binary,
        open("/proc/loadavg").read().strip()))
    for w in what:
        {"visible": visible, "failover": failover, "cold": cold}[w](binary)
        print("feed-bench: load average after %s: %s" % (w, open("/proc/loadavg").read().strip()))


if __name__ == "__main__":
    main(sys.argv)
