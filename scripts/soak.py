#!/usr/bin/env python3
"""Soak: N clients for S seconds on loopback against `mmrag serve`, mixing search, ask,
upload, delete, document listing and page renders (issue 16, item 4; `make soak`).

  scripts/soak.py BUILD MODELS [--clients 64] [--seconds 600] [--mix search=45,ask=8,...]

Starts the server on a fresh collection seeded with the generated corpus, then every client
loops over a weighted route mix on keep-alive connections. Samples the server's RSS and
open descriptors from /proc every 2 s. Prints per route: requests, p50/p99 ms, and status
classes; then the 5xx count, RSS growth after warm-up (the first fifth) and the spread of
open descriptors. Exit 1 when there was a 5xx, RSS grew by more than 5% after warm-up, or
the descriptors kept growing (more than 16 above their warm-up level)."""
import argparse
import http.client
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

MIX = [("search", 45), ("ask", 8), ("list", 10), ("page", 22), ("upload", 8), ("delete", 7)]
QUERIES = ["revenue by quarter", "how long to wait before opening the housing", "a bar chart",
           "error E12", "validation loss", "what cable cross-section", "maintenance schedule"]


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p / 100 * len(v)))] if v else 0.0


def proc_stats(pid):
    """RSS, open descriptors, and RSS split into anonymous and file-backed pages (KiB)."""
    kv = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile"):
                kv[k] = int(v.split()[0])
    return kv.get("VmRSS", 0), len(os.listdir(f"/proc/{pid}/fd")), kv.get("RssAnon", 0), kv.get("RssFile", 0)


def heap_stats(port):
    """The server's own count of heap bytes in use and free in malloc's arenas (/metrics);
    zeros when it has none."""
    got = {}
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("GET", "/metrics")
        for line in c.getresponse().read().decode().splitlines():
            for state in ("in_use", "free"):
                if line.startswith(f'mmrag_heap_bytes{{state="{state}"}}'):
                    got[state] = int(line.split()[1])
    except (http.client.HTTPException, OSError, ValueError):
        pass
    return got.get("in_use", 0), got.get("free", 0)


class Client(threading.Thread):
    def __init__(self, port, pdfs, stop, lat, codes, lock, seed, think):
        super().__init__(daemon=True)
        self.think = think
        self.port, self.pdfs, self.stop, self.lat, self.codes, self.lock = port, pdfs, stop, lat, codes, lock
        self.r = random.Random(seed)
        self.conn = None

    def req(self, method, path, body=None, ctype="application/json"):
        for attempt in (0, 1):   # a keep-alive connection the server closed: reconnect once
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
                self.conn.request(method, path, body=body, headers={"Content-Type": ctype} if body else {})
                resp = self.conn.getresponse()
                data = resp.read()
                if resp.status in (429, 503):   # as a well-behaved client: wait as told
                    self.stop.wait(min(2.0, float(resp.getheader("Retry-After", "1") or 1)))
                if resp.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                return resp.status, data
            except (http.client.HTTPException, OSError):
                if self.conn:
                    self.conn.close()
                self.conn = None
                if attempt:
                    return 0, b""
        return 0, b""

    def one(self, route):
        r = self.r
        if route == "search":
            return self.req("POST", "/v1/search", json.dumps({"query": r.choice(QUERIES), "k": 5}))
        if route == "ask":
            return self.req("POST", "/v1/ask", json.dumps({"question": r.choice(QUERIES), "max_tokens": 16}))
        if route == "list":
            return self.req("GET", "/v1/documents")
        st, body = self.req("GET", "/v1/documents")
        docs = json.loads(body).get("documents", []) if st == 200 else []
        if route == "page":
            if not docs:
                return st, body
            d = r.choice(docs)
            return self.req("GET", f"/v1/documents/{d['id']}/pages/{r.randint(1, max(1, d.get('pages', 1)))}.png?width=400")
        if route == "upload":
            src = r.choice(self.pdfs)
            data = open(src, "rb").read() + f"\n% soak {r.random()}\n".encode()
            return self.req("POST", "/v1/documents?name=soak.pdf", data, "application/pdf")
        if route == "delete":
            if len(docs) <= 3:   # keep something to search
                return st, body
            return self.req("DELETE", f"/v1/documents/{r.choice(docs)['id']}")
        raise ValueError(route)

    def run(self):
        names = [m[0] for m in MIX]
        weights = [m[1] for m in MIX]
        while not self.stop.is_set():
            if self.think > 0:   # a user reading the last answer before the next request
                self.stop.wait(self.r.expovariate(1 / self.think))
            route = self.r.choices(names, weights)[0]
            t0 = time.monotonic()
            st, _ = self.one(route)
            ms = (time.monotonic() - t0) * 1e3
            with self.lock:
                self.lat.setdefault(route, []).append(ms)
                k = (route, st // 100 if st else 0)
                self.codes[k] = self.codes.get(k, 0) + 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("models")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--think", type=float, default=0, help="mean seconds a client waits between "
                    "requests (exponential); 0 = none")
    ap.add_argument("--wrap", default="", help="command line put before the server's, e.g. "
                    "'valgrind --tool=massif' to see where its memory goes")
    ap.add_argument("--mix", help="route=weight,... instead of the default mix (e.g. search=1 to "
                    "find which route holds memory)")
    a = ap.parse_args()
    if a.mix:
        MIX[:] = [(k, int(v)) for k, v in (kv.split("=") for kv in a.mix.split(","))]
    tmp = tempfile.mkdtemp(prefix="mmrag-soak.")
    try:
        gen = os.path.join(tmp, "pdf")
        subprocess.run([os.path.join(a.build, "tests", "tool_gencorpus"), "corpus", gen], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([os.path.join(a.build, "tests", "tool_gencorpus"), "samples", gen], check=True, stdout=subprocess.DEVNULL)
        pdfs = sorted(os.path.join(gen, f) for f in os.listdir(gen) if f.endswith(".pdf"))
        env = dict(os.environ, MMRAG_MODELS=a.models)
        db = os.path.join(tmp, "db")
        subprocess.run([os.path.join(a.build, "mmrag"), "index", "--db", db] + pdfs, env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out = open(os.path.join(tmp, "srv.out"), "w+")
        srv = subprocess.Popen(a.wrap.split() + [os.path.join(a.build, "mmrag"), "serve", "--listen", "127.0.0.1:0", "--db", db,
                                "--quiet", "--rate-limit", "0"], env=env, stdout=out, stderr=subprocess.STDOUT)
        port = None
        for _ in range(100 if not a.wrap else 1200):
            out.seek(0)
            for line in out:
                if line.startswith("listening on"):
                    port = int(line.rsplit(":", 1)[1])
            if port:
                break
            time.sleep(0.1)
        if not port:
            sys.exit("soak: the server did not start")
        stop, lock = threading.Event(), threading.Lock()
        lat, codes, samples = {}, {}, []
        clients = [Client(port, pdfs, stop, lat, codes, lock, i, a.think) for i in range(a.clients)]
        t0 = time.monotonic()
        for c in clients:
            c.start()
        while time.monotonic() - t0 < a.seconds:
            time.sleep(2)
            samples.append((time.monotonic() - t0,) + proc_stats(srv.pid) + heap_stats(port))
        stop.set()
        for c in clients:
            c.join(timeout=150)
        srv.terminate()
        rc = srv.wait(timeout=60)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"soak: {a.clients} clients, think {a.think:g} s, {a.seconds:.0f} s, server exit {rc}")
    print(f"  {'route':8} {'requests':>9} {'p50 ms':>8} {'p99 ms':>9}  status classes")
    for route, _ in MIX:
        v = lat.get(route, [])
        cls = " ".join(f"{k[1]}xx:{n}" if k[1] else f"no-reply:{n}" for k, n in sorted(codes.items()) if k[0] == route)
        print(f"  {route:8} {len(v):9d} {pct(v, 50):8.1f} {pct(v, 99):9.1f}  {cls}")
    five = sum(n for k, n in codes.items() if k[1] == 5 or k[1] == 0)
    warm = [s for s in samples if s[0] >= a.seconds / 5]
    rss0, rss1 = (warm[0][1], warm[-1][1]) if warm else (0, 0)
    fd0 = warm[0][2] if warm else 0
    fdmax = max((s[2] for s in warm), default=0)
    growth = (rss1 - rss0) / rss0 if rss0 else 0
    w0, w1 = (warm[0], warm[-1]) if warm else ((0,) * 7, (0,) * 7)
    print(f"  5xx or no reply: {five}; RSS after warm-up {rss0 / 1024:.0f} -> {rss1 / 1024:.0f} MiB "
          f"({growth * 100:+.1f}%), peak {max((s[1] for s in samples), default=0) / 1024:.0f} MiB; "
          f"open descriptors {fd0} -> max {fdmax}")
    print(f"  of the RSS: anonymous {w0[3] / 1024:.0f} -> {w1[3] / 1024:.0f} MiB, file-backed "
          f"{w0[4] / 1024:.0f} -> {w1[4] / 1024:.0f} MiB")
    if w0[5]:
        print(f"  malloc's count: in use {w0[5] / 2**20:.0f} -> {w1[5] / 2**20:.0f} MiB, free in its "
              f"arenas {w0[6] / 2**20:.0f} -> {w1[6] / 2**20:.0f} MiB")
    marks = [samples[int(i * (len(samples) - 1) / 10)] for i in range(11)] if samples else []
    print("  RSS over the run (MiB, every tenth):", " ".join(f"{m[1] / 1024:.0f}" for m in marks))
    ok = five == 0 and growth <= 0.05 and fdmax - fd0 <= 16 and rc == 0
    print("soak:", "ok" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
