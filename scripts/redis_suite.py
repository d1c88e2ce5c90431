#!/usr/bin/env python3
"""`make redis-suite`: Redis 7.0.15's own Tcl test suite against brisk-kv and,
side by side, against a real redis-server, one fresh server per test file,
in the suite's external-server mode. Writes the per-file table to
bench/results/redis-suite.md (and prints it).

Where the suite comes from: ../shared/redis-suite/redis-7.0.15-tests.tar.gz
when this checkout has one beside it (the project's workplace), else the
upstream tarball of Debian's redis source package (redis_7.0.15.orig.tar.gz,
fetched with `apt-get source --download-only` through a private deb-src
list into build/redis-suite/). Needs tclsh and redis-server (scripts/deps.sh
installs them).

usage: scripts/redis_suite.py [--group core8|compat|scripting|streams|all]
                              [--files "unit/a unit/b"] [--no-reference]
                              [--server BIN] [--timeout S] [--out FILE]
"""
from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "build" / "redis-suite"
SHARED = ROOT.parent / "shared" / "redis-suite" / "redis-7.0.15-tests.tar.gz"

CORE8 = ("unit/type/string unit/type/incr unit/type/zset unit/expire unit/keyspace unit/protocol "
         "unit/info-command unit/quit").split()
COMPAT = CORE8 + """unit/type/hash unit/type/list unit/type/list-2 unit/type/list-3 unit/type/set
 unit/scan unit/multi unit/pubsub unit/pubsubshard unit/other unit/introspection
 unit/introspection-2 unit/bitops unit/bitfield unit/tracking unit/querybuf unit/dump unit/geo
 unit/hyperloglog unit/sort unit/latency-monitor unit/slowlog unit/info unit/auth unit/acl
 unit/limits unit/maxmemory unit/pause unit/wait""".split()
GROUPS = {"core8": CORE8, "compat": COMPAT, "scripting": ["unit/scripting", "unit/functions"],
          "streams": ["unit/type/stream", "unit/type/stream-cgroups"]}
GROUPS["all"] = COMPAT + GROUPS["scripting"] + GROUPS["streams"]
SKIP_TAGS = "-needs:debug -needs:repl -needs:save -needs:config-maxmemory -needs:reset"
DEB_SRC = """Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def log(msg: str):
    print(f"[redis-suite] {msg}", file=sys.stderr, flush=True)


def suite_tarball() -> Path:
    if SHARED.exists():
        return SHARED
    WORK.mkdir(parents=True, exist_ok=True)
    got = sorted(WORK.glob("redis_7.0.*.orig.tar.gz"))
    if got:
        return got[-1]
    log("fetching Debian's redis source package (deb-src, apt-get source --download-only)")
    apt = WORK / "apt"
    (apt / "parts").mkdir(parents=True, exist_ok=True)
    (apt / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (apt / "parts" / "debian-src.sources").write_text(DEB_SRC)
    opts = ["-o", "Dir::Etc::SourceList=/dev/null", "-o", f"Dir::Etc::SourceParts={apt}/parts",
            "-o", f"Dir::State::Lists={apt}/lists"]
    subprocess.run(["apt-get", *opts, "update", "-qq"], check=True)
    subprocess.run(["apt-get", *opts, "source", "--download-only", "-qq", "redis"], check=True,
                   cwd=WORK)
    got = sorted(WORK.glob("redis_7.0.*.orig.tar.gz"))
    if not got:
        sys.exit("redis-suite: Debian's redis source gave no redis_7.0.*.orig.tar.gz")
    return got[-1]


def unpack(tarball: Path, dest: Path) -> Path:
    with tarfile.open(tarball) as t:
        members = [m for m in t.getmembers()
                   if re.match(r"^[^/]+/(runtest|tests)(/|$)", m.name)]
        t.extractall(dest, members=members)
    return next(p.parent for p in dest.glob("*/runtest"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 10.0) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def run_one(suite: Path, binary: str, is_redis: bool, test: str, timeout: int, tmp: Path) -> dict:
    port = free_port()
    data = Path(tempfile.mkdtemp(dir=tmp))
    # Both servers alike: no save points (the default has some since brisk-kv
    # follows Redis 7.0's), no AOF.
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data),
            "--save", "", "--appendonly", "no"]
    with open(data / "server.log", "wb") as logf:
        srv = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT)
    try:
        if not wait_port(port):
            return {"ok": 0, "err": 0, "exc": 1, "alive": False, "first": "server did not start"}
        cmd = ["./runtest", "--host", "127.0.0.1", "--port", str(port), "--singledb",
               "--ignore-encoding", "--ignore-digest", "--tags", SKIP_TAGS, "--single", test,
               "--clients", "1", "--baseport", str(random.randint(30000, 50000)),
               "--portcount", "100"]
        try:
            p = subprocess.run(cmd, cwd=suite, capture_output=True, text=True, errors="replace",
                               timeout=timeout)
            out = p.stdout + p.stderr
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode(errors="replace") + "\nTimed out"
        out = re.sub(r"\x1b\[[0-9;]*m", "", out)
        fails = [ln for ln in out.splitlines() if re.search(r"\[(err|exception)\]:", ln)]
        ok, err = len(re.findall(r"\[ok\]:", out)), len(re.findall(r"\[err\]:", out))
        if not fails and not ok and not err and "[1/1 done]" not in out:
            # say why, rather than a silent 0 (its ports taken, ...)
            last = [ln for ln in out.splitlines() if ln.strip()][-1:] or ["no output"]
            fails = ["the harness ran no test: " + last[0].strip()]
        return {"ok": ok, "err": err,
                "exc": len(re.findall(r"\[exception\]:|Killing still running|Timed out", out)),
                "alive": srv.poll() is None, "first": fails[0][:110] if fails else ""}
    finally:
        srv.terminate()
        try:
            srv.wait(5)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


def run_twice(suite: Path, binary: str, is_redis: bool, test: str, timeout: int, tmp: Path) -> dict:
    """run_one, once more when the harness itself ran nothing (no [ok], no
    [err]: its own ports taken by another run on a busy machine)."""
    r = run_one(suite, binary, is_redis, test, timeout, tmp)
    if r["ok"] == 0 and r["err"] == 0:
        r = run_one(suite, binary, is_redis, test, timeout, tmp)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--group", default="all", choices=sorted(GROUPS))
    ap.add_argument("--files")
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--server", default=str(ROOT / "build" / "bin" / "brisk-kv"))
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "redis-suite.md"))
    a = ap.parse_args()
    files = a.files.split() if a.files else GROUPS[a.group]
    redis = shutil.which("redis-server")
    if not a.no_reference and not redis:
        sys.exit("redis-suite: redis-server is not installed (scripts/deps.sh test installs it)")
    if not shutil.which("tclsh"):
        sys.exit("redis-suite: tclsh is not installed (Debian package tcl)")
    tarball = suite_tarball()
    with tempfile.TemporaryDirectory() as tmpd:
        tmp = Path(tmpd)
        suite = unpack(tarball, tmp / "src")
        rows, t_b, t_r = [], 0, 0
        for f in files:
            if not (suite / "tests" / f"{f}.tcl").exists():
                log(f"{f}: not in this suite")
                continue
            b = run_twice(suite, a.server, False, f, a.timeout, tmp)
            r = run_twice(suite, redis, True, f, a.timeout, tmp) if not a.no_reference else None
            t_b += b["ok"]
            t_r += r["ok"] if r else 0
            pct = f"{100 * b['ok'] / r['ok']:.0f}%" if r and r["ok"] else "—"
            err = f"{b['err']}" + ("+exc" if b["exc"] else "")
            rows.append((f, r["ok"] if r else "—", b["ok"], pct, err,
                         "alive" if b["alive"] else "**DEAD**", b["first"].replace("|", "\\|")))
            log(f"{f}: brisk-kv {b['ok']} ok, {err} err" + (f"; Redis {r['ok']} ok" if r else ""))
    lines = ["<!-- Generated by `make redis-suite` (scripts/redis_suite.py). -->", "",
             f"Redis 7.0.15's own test suite ({tarball.name}), external-server mode, one fresh "
             f"server per file, tags `{SKIP_TAGS}` left out; run {time.strftime('%Y-%m-%d')}. "
             "`err` counts failed assertions (`+exc`: the file stopped at an exception).", "",
             "| file | Redis 7.0.15 ok | brisk-kv ok | brisk-kv / Redis | err | server | first failure |",
             "|---|--:|--:|--:|--:|---|---|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    lines += [f"| **total** | **{t_r}** | **{t_b}** | "
              f"**{100 * t_b / t_r:.0f}%** | | | |" if t_r else f"| **total** | | **{t_b}** | | | | |"]
    text = "\n".join(lines) + "\n"
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
