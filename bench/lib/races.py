"""The six races of `make bench` (bench/run.py). Each function returns a
race dict (see new_race) and never raises for a failure of its own: a race
that cannot run is "pending" (its program does not exist yet) or "failed"
(with the reason), and the others still run.
"""
import os
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
import traceback
from pathlib import Path

import rest_load
from harness import (BIN, LIB, PEERS, BenchError, Server, bun_server, fasthttp_server, finish_case,
                     first_line, free_port, log, measure_costs, new_case, peer_available,
                     probe_server, run_alternating, run_h2_load, run_h2load, run_hey,
                     run_httperf, run_redis_benchmark, run_tls_conns, run_wrk, sb, simple_server,
                     summarize)


def with_available(race, names):
    """names less the peers bench/run.sh could not set up (noted once)."""
    out = []
    for n in names:
        if peer_available(n):
            out.append(n)
        else:
            race["notes"].append(f"{n} is not set up here (bench/run.sh installs it): not raced.")
    return out


def new_race(key, title, peer, status="ok", reason=""):
    return {"key": key, "title": title, "peer": peer, "status": status, "reason": reason,
            "method": [], "notes": [], "cases": [], "costs": [], "charts": []}


def guarded(fn):
    """Runs a race; a BenchError or any other exception marks it failed,
    keeping what it measured before."""
    def run(ctx):
        try:
            return fn(ctx)
        except Exception as e:  # noqa: BLE001 (Ctrl-C and SystemExit still unwind)
            race = ctx.get("race") or new_race(fn.__name__.replace("race_", ""), "?", "?")
            race["status"] = "failed"
            race["reason"] = str(e).strip()
            log(f"race {race['key']} FAILED: {e}")
            if not isinstance(e, BenchError):
                log(traceback.format_exc())
            return race
        finally:
            stop_all()
            ctx.pop("race", None)
    return run


def stop_all():
    """Stops every server still running (a race stops its own as it goes;
    this is for failures)."""
    for s in sb.PROCS:
        if s.proc is not None and s.proc.poll() is None:
            s.stop(timeout=10)
            s.kill()
    rest_load.stop_clusters()  # the rest race's PostgreSQL, after the servers using it


def check_http(server, path, body=None, length=None):
    """One GET through the counting client: 200 with the right body."""
    from harness import client_argv
    spec = {"proto": "http", "path": path, "expect_len": length}
    argv = client_argv(spec, server.port, 1, 1, 1)
    if body is not None:
        argv += ["--expect-body", body]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise BenchError(f"{server.name} on :{server.port} answers {path} wrong: "
                         f"{p.stderr.strip()}\n{server.log_tail()}")


def start(make, prefix=(), timeout=15):
    port = free_port()
    return make(port).start(port, prefix=prefix, start_timeout=timeout)


def wrk_cases(ctx, race, contenders, makers, cases, prefix_srv, prefix_cli, threads=1):
    """Starts the contenders, checks them, runs every wrk case alternating
    A B [C] per round, stops them. cases: [(key, name, path, pipeline,
    target, headline, check)] where check(server) verifies the answer."""
    s = ctx["settings"]
    servers = []
    try:
        for name in contenders:
            srv = start(makers[name], prefix_srv)
            servers.append((name, srv))
            log(f"{race['key']}: {name}: {shlex.join(srv.argv)} on :{srv.port}")
        for key, cname, path, pipeline, target, headline, check in cases:
            for name, srv in servers:
                check(name, srv)
            load = (f"wrk -t{threads} -c50 -d{s.duration}s" + (f", pipelined {pipeline}" if pipeline
                                                               else ", keep-alive") + f", `{path}`")
            case = new_case(key, cname, load, contenders, target=target, headline=headline)

            def run_fn(name, srv, duration, warm, path=path, pipeline=pipeline, key=key):
                return {key: run_wrk(prefix_cli, f"http://127.0.0.1:{srv.port}{path}", duration,
                                     threads=threads, pipeline=pipeline)}
            run_alternating(s, servers, [case], run_fn, f"{race['key']}: {cname}")
            race["cases"].append(finish_case(case))
    finally:
        for _, srv in servers:
            srv.stop()


def pins(ctx):
    return ctx["pins"]


# ---------------------------------------------------------------- hello

@guarded
def race_hello(ctx):
    race = ctx["race"] = new_race("hello", "hello world: brisk-hello vs Node.js http", "node")
    s, tmp = ctx["settings"], ctx["tmp"]
    if not (BIN / "brisk-hello").exists():
        race.update(status="pending", reason="build/bin/brisk-hello is not built")
        return race
    srv_pin, cli_pin = pins(ctx)
    race["method"] = [
        "brisk: `build/bin/brisk-hello --listen 127.0.0.1:PORT --workers N`; "
        "node: `node bench/peers/hello.js PORT` (one process) or "
        "`node bench/peers/cluster.js hello.js 2 PORT` (cluster, 2 workers).",
        f"Per core: brisk 1 worker vs 1 node process, server `{shlex.join(srv_pin) or 'unpinned'}`, "
        f"wrk `{shlex.join(cli_pin) or 'unpinned'}` `-t1 -c50`. "
        "All cores: brisk 2 workers vs node cluster of 2, nothing pinned, wrk `-t2 -c50` "
        "(the load generator shares the 2 cores).",
        "Pipelined = bench/pipeline.lua (16 requests per write).",
    ]
    mk = {
        "brisk": simple_server("brisk", lambda p: [str(BIN / "brisk-hello"), "--listen",
                                                   f"127.0.0.1:{p}", "--workers", "1"], tmp),
        "node": simple_server("node", lambda p: ["node", str(PEERS / "hello.js"), str(p),
                                                 "127.0.0.1"], tmp),
        "bun": bun_server("bun-hello.js", tmp),
        "fasthttp": fasthttp_server("hello", tmp),
    }
    mk["probe"] = probe_server(tmp, mk["brisk"], "/")
    mk_all = {
        "brisk": simple_server("brisk", lambda p: [str(BIN / "brisk-hello"), "--listen",
                                                   f"127.0.0.1:{p}", "--workers", "2"], tmp),
        "node": simple_server("node", lambda p: ["node", str(PEERS / "cluster.js"), "hello.js", "2",
                                                 str(p), "127.0.0.1"], tmp),
    }

    def check(name, srv):
        check_http(srv, "/", body="Hello World")

    race["method"].append("The fastest peers, per core: Bun (`bun bench/peers/bun-hello.js`, "
                          "Bun.serve) and Go's fasthttp (`bench/peers/fasthttp`, GOMAXPROCS=1); "
                          "the limit probe (bench/peers/probe.c: counts `\\r\\n\\r\\n` and "
                          "writes brisk's own response bytes) shows what the machine allows.")
    wrk_cases(ctx, race, with_available(race, ["brisk", "node", "bun", "fasthttp", "probe"]), mk, [
        ("core-ka", "1 core, keep-alive", "/", 0, None, True, check),
        ("core-p16", "1 core, pipelined 16", "/", 16, 3.0, True, check),
    ], srv_pin, cli_pin)
    wrk_cases(ctx, race, ["brisk", "node"], mk_all, [
        ("all-ka", "all cores, keep-alive", "/", 0, None, True, check),
        ("all-p16", "all cores, pipelined 16", "/", 16, None, False, check),
    ], (), (), threads=2)
    race["notes"].append("Target from the handler-API issue: >= 3x Node.js per core where the load "
                         "generator is not the bottleneck (pipelined); keep-alive without pipelining "
                         "is bounded by wrk on one core.")
    if ctx["costs"]:
        spec = {"proto": "http", "path": "/", "expect_len": 11}
        for name in ("brisk", "node"):
            # node's count settles only over tens of thousands of requests
            # (JIT tiering and GC heap growth): 30,000 after 5,000 of warm-up
            extra = {"cg_rounds": 3000, "cg_warm_rounds": 500} if name == "node" else {}
            race["costs"].append(measure_costs(name, mk[name], tmp, spec, s,
                                               **extra) | {"request": "`GET /` (11 bytes)", "short": "GET /"})
    return race


# ---------------------------------------------------------------- static

@guarded
def race_static(ctx):
    race = ctx["race"] = new_race("static", "static files: brisk vs nginx", "nginx")
    s, tmp = ctx["settings"], ctx["tmp"]
    if not (BIN / "brisk").exists():
        race.update(status="pending", reason="build/bin/brisk is not built")
        return race
    srv_pin, cli_pin = pins(ctx)
    root = tmp / "www"
    sb.make_docroot(root)
    mk = {"brisk": sb.brisk_server(tmp, root), "nginx": sb.nginx_server("nginx", tmp, root),
          "h2o": sb.h2o_server("h2o", tmp, root)}
    mk["probe"] = probe_server(tmp, mk["brisk"], f"/{sb.SMALL}")
    race["method"] = [
        "The race of bench/static.sh: a 117-byte `index.html` and a 1 MiB `1m.bin` served from "
        "one temp dir. brisk `--workers 1 --access-log off`; nginx from "
        "bench/peers/nginx-static.conf.in (1 worker, sendfile on, tcp_nopush on, access_log off).",
        f"Servers `{shlex.join(srv_pin) or 'unpinned'}`, load `{shlex.join(cli_pin) or 'unpinned'}`: "
        "wrk `-t1 -c50` keep-alive and pipelined 16; hey `-c 8` with and without keep-alive.",
    ]

    def check(name, srv):
        sb.verify(srv, root, tmp)

    def check_any(name, srv):
        if name == "probe":
            check_http(srv, small, length=sb.SMALL_SIZE)
        else:
            sb.verify(srv, root, tmp)

    small, big = f"/{sb.SMALL}", f"/{sb.BIG}"
    race["method"].append("Also h2o (Debian's h2o, `num-threads: 1`, file.dir) and, on the 117-byte "
                          "file, the limit probe (bench/peers/probe.c) answering with brisk's own "
                          "response bytes.")
    wrk_cases(ctx, race, with_available(race, ["brisk", "nginx", "h2o", "probe"]), mk, [
        ("small-ka", "117 B, wrk keep-alive", small, 0, 1.5, True, check_any),
        ("small-p16", "117 B, wrk pipelined 16", small, 16, 10.0, True, check_any),
    ], srv_pin, cli_pin)
    wrk_cases(ctx, race, with_available(race, ["brisk", "nginx", "h2o"]), mk, [
        ("big-ka", "1 MiB, wrk keep-alive", big, 0, 1.0, True, check),
        ("big-p16", "1 MiB, wrk pipelined 16", big, 16, 1.0, False, check),
    ], srv_pin, cli_pin)

    if shutil.which("hey"):
        servers = []
        try:
            for name in ("brisk", "nginx"):
                servers.append((name, start(mk[name], srv_pin)))
            hey = [("hey-small-ka", "117 B, hey -c 8 keep-alive", small, True, False),
                   ("hey-small-close", "117 B, hey -c 8 no keep-alive", small, False, True)]
            if not s.quick:
                hey += [("hey-big-ka", "1 MiB, hey -c 8 keep-alive", big, True, False),
                        ("hey-big-close", "1 MiB, hey -c 8 no keep-alive", big, False, False)]
            else:
                race["notes"].append("Quick mode runs hey on the 117-byte file only.")
            for key, cname, path, ka, headline in hey:
                load = f"hey -z {s.duration}s -c 8" + ("" if ka else " -disable-keepalive") + f", `{path}`"
                case = new_case(key, cname, load, ["brisk", "nginx"], headline=headline)

                def run_fn(name, srv, duration, warm, path=path, ka=ka, key=key):
                    return {key: run_hey(cli_pin, f"http://127.0.0.1:{srv.port}{path}", duration,
                                         keepalive=ka)}
                run_alternating(s, servers, [case], run_fn, f"static: {cname}")
                race["cases"].append(finish_case(case))
        finally:
            for _, srv in servers:
                srv.stop()
    else:
        race["notes"].append("hey is not installed (not packaged here): the hey races were skipped.")
    race["notes"].append("Targets from the Foundation issue: >= 1.5x nginx on the 117-byte file, "
                         ">= 10x pipelined, >= 1.0x on the 1 MiB file.")
    race["notes"].append("hey (Go) is the slower load generator: its figures are bounded by hey "
                         "on one core, as in the original race.")
    if ctx["costs"]:
        for f, size, cg in ((sb.SMALL, sb.SMALL_SIZE, True), (sb.BIG, sb.BIG_SIZE, False)):
            spec = {"proto": "http", "path": f"/{f}", "expect_len": size}
            for name in ("brisk", "nginx"):
                what = ("strace", "callgrind") if cg else ("strace",)
                row = measure_costs(name, mk[name], tmp, spec, s, what=what)
                row["request"] = f"`GET /{f}` ({'117 B' if f == sb.SMALL else '1 MiB'})"
                row["short"] = "117 B" if f == sb.SMALL else "1 MiB"
                race["costs"].append(row)
    return race


# ---------------------------------------------------------------- echo

@guarded
def race_echo(ctx):
    race = ctx["race"] = new_race("echo", "echo with a query: brisk-echo vs Node.js, nginx as reference",
                                  "node")
    s, tmp = ctx["settings"], ctx["tmp"]
    if not (BIN / "brisk-echo").exists():
        race.update(status="pending", reason="build/bin/brisk-echo is not built")
        return race
    srv_pin, cli_pin = pins(ctx)
    root = tmp / "echo-www"
    root.mkdir()
    (root / "hello").write_text("hello")
    os.chmod(root, 0o755)
    os.chmod(root / "hello", 0o644)
    query = "/?value=hello"
    mk = {
        "brisk": simple_server("brisk", lambda p: [str(BIN / "brisk-echo"), "--listen",
                                                   f"127.0.0.1:{p}", "--workers", "1"], tmp),
        "node": simple_server("node", lambda p: ["node", str(PEERS / "echo.js"), str(p),
                                                 "127.0.0.1"], tmp),
        "nginx": sb.nginx_server("nginx", tmp, root),
        "bun": bun_server("bun-echo.js", tmp),
        "fasthttp": fasthttp_server("echo", tmp),
    }
    mk["probe"] = probe_server(tmp, mk["brisk"], query)
    paths = {"brisk": query, "node": query, "nginx": "/hello", "bun": query, "fasthttp": query,
             "probe": query}
    wrk_names = with_available(race, ["brisk", "node", "bun", "fasthttp", "nginx", "probe"])
    race["method"] = [
        "brisk: `build/bin/brisk-echo --workers 1`, node: `node bench/peers/echo.js`, both asked "
        f"`GET {query}` (answer `hello`); reference line: nginx (1 worker) serving a static "
        "5-byte file `/hello` with the same body.",
        f"Servers `{shlex.join(srv_pin) or 'unpinned'}`, load `{shlex.join(cli_pin) or 'unpinned'}`.",
        f"httperf sweep: offered rate R new connections/s with {s.sweep_calls} requests each "
        f"(offered = {s.sweep_calls}R requests/s), {s.sweep_seconds} s per point, "
        "`--timeout 2`; response rate = 2xx replies / test duration.",
    ]

    def check(name, srv):
        check_http(srv, paths[name], body="hello")

    servers = []
    try:
        for name in wrk_names:
            servers.append((name, start(mk[name], srv_pin)))
        for name, srv in servers:
            check(name, srv)
        for key, cname, pipeline, headline, target in (
                ("core-ka", "1 core each, wrk keep-alive", 0, True, None),
                ("core-p16", "1 core each, wrk pipelined 16", 16, True, 3.0)):
            load = f"wrk -t1 -c50 -d{s.duration}s" + (f", pipelined {pipeline}" if pipeline else
                                                      ", keep-alive")
            case = new_case(key, cname, load, wrk_names, headline=headline, target=target)

            def run_fn(name, srv, duration, warm, pipeline=pipeline, key=key):
                return {key: run_wrk(cli_pin, f"http://127.0.0.1:{srv.port}{paths[name]}",
                                     duration, pipeline=pipeline)}
            run_alternating(s, servers, [case], run_fn, f"echo: {cname}")
            race["cases"].append(finish_case(case))

        # the httperf sweep (brisk, node, nginx): every round walks the rates,
        # servers alternating at each
        sweep_servers = [(n, srv) for n, srv in servers if n in ("brisk", "node", "nginx")]
        names = [n for n, _ in sweep_servers]
        points = {n: [[] for _ in s.sweep_rates] for n in names}
        detail = {n: [[] for _ in s.sweep_rates] for n in names}
        for rnd in range(s.rounds):
            for i, rate in enumerate(s.sweep_rates):
                got = []
                for name, srv in sweep_servers:
                    r = run_httperf(cli_pin, srv.port, paths[name], rate, s.sweep_calls,
                                    s.sweep_seconds)
                    points[name][i].append(None if r["failed"] else r["value"])
                    detail[name][i].append(r)
                    got.append(f"{name} {r['value'] or 0:,.0f}"
                               + (f" ({r['errors']} errors)" if r.get("errors") else ""))
                    time.sleep(0.2)
                log(f"  echo sweep round {rnd + 1}/{s.rounds}, offered {rate * s.sweep_calls:,}/s: "
                    + ", ".join(got))
        sweep = {"offered": [r * s.sweep_calls for r in s.sweep_rates], "calls": s.sweep_calls,
                 "series": {}, "errors": {}}
        for n in names:
            sweep["series"][n] = [summarize(v) for v in points[n]]
            sweep["errors"][n] = [max((d.get("errors") or 0) for d in ds) if ds else None
                                  for ds in detail[n]]
        peaks = {}
        for n in names:
            meds = [p["median"] for p in sweep["series"][n] if p]
            peaks[n] = max(meds) if meds else None
        sweep["peak"] = peaks
        # pair-by-pair ratio of the peaks: per round, best response rate of each
        per_round = {n: [max((points[n][i][r] or 0) for i in range(len(s.sweep_rates)))
                         for r in range(s.rounds)] for n in names}
        case = new_case("sweep-peak", "httperf peak response rate", "httperf sweep (see below)",
                        ["brisk", "node", "nginx"], metric="replies/s", headline=True, target=3.0)
        for r in range(s.rounds):
            case["rounds"].append({n: {"value": per_round[n][r] or None,
                                       "failed": "" if per_round[n][r] else "no replies"}
                                   for n in names})
        race["cases"].append(finish_case(case))
        race["sweep"] = sweep
        race["notes"].append("Target from the handler-API issue: >= 3x Node.js per core where the "
                             "load generator is not the bottleneck (pipelined, or the httperf knee). "
                             "httperf is single-threaded (select(), at most 1,024 open connections): "
                             "near 100k requests/s it is the limit, not the server.")
    finally:
        for _, srv in servers:
            srv.stop()
    return race


# ---------------------------------------------------------------- kv

EVAL_SCRIPT = "return redis.call('INCR', KEYS[1])"
STREAM_ENTRY = ["f1", "v1", "f2", "v2", "f3", "v3"]  # 3 small fields
SYNC_KEYS = 1000000  # the full sync and BGSAVE cases: 1M keys of 64 B values


def rss_bytes(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return None


def private_bytes(pid):
    """A process's private resident bytes (a fork child's copied pages)."""
    try:
        total = 0
        for line in open(f"/proc/{pid}/smaps_rollup"):
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                total += int(line.split()[1]) * 1024
        return total
    except OSError:
        return 0


def cpu_ns(pid):
    """On-CPU time of every thread of pid (schedstat, ns). The server's own
    cost per operation: less sensitive than throughput to other work on a
    shared machine (which delays the server but does not run on its clock)."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def children(pid):
    try:
        return [int(x) for x in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def redis_cli(port, *args):
    p = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port)] + list(args),
                       capture_output=True, text=True, timeout=30)
    return p.stdout.strip()


def _resp_read(f):
    line = f.readline()
    if not line.endswith(b"\r\n"):
        raise BenchError("connection closed mid-reply")
    t, body = line[:1], line[1:-2]
    if t == b"+":
        return body.decode()
    if t == b"-":
        raise BenchError(body.decode())
    if t == b":":
        return int(body)
    if t == b"$":
        n = int(body)
        return None if n < 0 else f.read(n + 2)[:-2].decode(errors="replace")
    if t == b"*":
        n = int(body)
        return None if n < 0 else [_resp_read(f) for _ in range(n)]
    raise BenchError(f"bad reply line {line!r}")


def resp(port, *args, timeout=60):
    """One command on a fresh connection (cheap enough for polling at 10 ms)."""
    msg = f"*{len(args)}\r\n".encode() + b"".join(
        f"${len(str(a).encode())}\r\n".encode() + str(a).encode() + b"\r\n" for a in args)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as c:
        c.sendall(msg)
        with c.makefile("rb") as f:
            return _resp_read(f)


def info_field(port, section, field):
    for line in resp(port, "INFO", section).splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    return None


def kv_maker(name, kvdir, extra=()):
    """port -> Server: brisk-kv or redis-server (by name), each in its own
    directory (dump.rdb, replica temp files), no persistence of its own."""
    def make(port):
        d = kvdir / f"{name}-{port}"
        d.mkdir(parents=True, exist_ok=True)
        if name.startswith("brisk"):
            argv = [str(BIN / "brisk-kv"), "--port", str(port), "--bind", "127.0.0.1",
                    "--appendonly", "no", "--save", "", "--dir", str(d)]
        else:
            argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--dir", str(d)]
        return Server(name, argv + list(extra), signal.SIGTERM, workdir=d)
    return make


def run_redis_benchmark_cmd(prefix, port, n, pipeline, command, clients=50):
    """redis-benchmark with an arbitrary command (its CSV has one line)."""
    argv = list(prefix) + ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", str(clients),
                           "-P", str(pipeline), "-n", str(n), "--csv"] + list(command)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    for line in p.stdout.splitlines():
        cols = [c.strip('"') for c in line.strip().split(",")]
        if len(cols) >= 2 and cols[0] != "test":
            try:
                return {"value": float(cols[1]), "p50": f"{cols[4]}ms" if len(cols) > 4 else None,
                        "p99": f"{cols[6]}ms" if len(cols) > 6 else None, "failed": ""}
            except ValueError:
                pass
    return {"value": None, "failed": f"redis-benchmark gave no line (exit {p.returncode}): "
                                     f"{first_line(p.stderr or p.stdout)}"}


def build_tool(tmp, name):
    """Builds bench/lib/NAME.c (a load generator of the kv race) once per run."""
    out = tmp / name
    if not out.exists():
        p = subprocess.run(["cc", "-O2", "-o", str(out), str(LIB / f"{name}.c")],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise BenchError(f"cannot build bench/lib/{name}.c: {p.stderr.strip()}")
    return out


def run_resp_load(prefix, tool, port, n, depth, command, clients=50):
    """bench/lib/resp_load.c: `command` n times over `clients` connections,
    `depth` in flight on each (redis-benchmark's -c/-P), operations/s."""
    p = subprocess.run(list(prefix) + [str(tool), str(port), str(clients), str(depth), str(n)]
                       + list(command), capture_output=True, text=True, timeout=600)
    m = re.match(r"ops (\d+) seconds ([\d.]+) rate ([\d.]+)", p.stdout.strip())
    if p.returncode != 0 or not m:
        return {"value": None, "failed": f"resp_load exit {p.returncode}: {first_line(p.stderr)}"}
    return {"value": float(m.group(3)), "failed": ""}


def run_xgroup(prefix, tool, port, entries, pid, conns=16, count=10):
    """Pre-adds `entries` entries (not timed), then drains them with
    XREADGROUP COUNT count + XACK on `conns` connections (timed; the
    server's CPU time per entry in "cpu_us")."""
    key = "bench:xgroup"
    resp(port, "DEL", key)
    fill = run_redis_benchmark_cmd(prefix, port, entries, 16, ["XADD", key, "*"] + STREAM_ENTRY)
    if fill["failed"]:
        return fill
    resp(port, "XGROUP", "CREATE", key, "g", "0")
    c0 = cpu_ns(pid)
    p = subprocess.run(list(prefix) + [str(tool), str(port), str(conns), key, "g", str(count)],
                       capture_output=True, text=True, timeout=600)
    cpu_us = (cpu_ns(pid) - c0) / entries / 1000
    m = re.match(r"acked (\d+) seconds ([\d.]+) rate ([\d.]+)", p.stdout.strip())
    resp(port, "DEL", key)
    if p.returncode != 0 or not m:
        return {"value": None, "failed": f"xgroup_load exit {p.returncode}: {first_line(p.stderr)}"}
    if int(m.group(1)) != entries:
        return {"value": None, "failed": f"acked {m.group(1)} of {entries} entries"}
    return {"value": float(m.group(3)), "failed": "", "cpu_us": cpu_us}


def sync_data_file(tmp):
    """SET commands for SYNC_KEYS keys with 64-byte values (hex of random
    bytes: not as compressible as redis-benchmark's 'xxx...'), in RESP for
    `redis-cli --pipe`; written once per run."""
    path = tmp / "kv-sync-data.resp"
    if not path.exists():
        rnd = random.Random(1)
        with open(path, "wb") as f:
            chunk = []
            for i in range(SYNC_KEYS):
                k = f"key:{i:07d}"
                v = rnd.getrandbits(256).to_bytes(32, "little").hex()
                chunk.append(f"*3\r\n$3\r\nSET\r\n${len(k)}\r\n{k}\r\n$64\r\n{v}\r\n")
                if len(chunk) == 10000:
                    f.write("".join(chunk).encode())
                    chunk = []
            f.write("".join(chunk).encode())
    return path


def load_pipe(prefix, port, path):
    with open(path, "rb") as f:
        p = subprocess.run(list(prefix) + ["redis-cli", "-h", "127.0.0.1", "-p", str(port), "--pipe"],
                           stdin=f, capture_output=True, text=True, timeout=600)
    if p.returncode != 0 or "errors: 0" not in p.stdout:
        raise BenchError(f"redis-cli --pipe into :{port} failed: {p.stdout[-300:]} {p.stderr[-300:]}")


def wait_link_up(port, keys=None, timeout=300, poll=0.01):
    """Until the replica on port reports its link up (and, with keys, holds
    that many keys). Returns the seconds it took, or raises."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if info_field(port, "replication", "master_link_status") == "up":
            if keys is None or resp(port, "DBSIZE") == keys:
                return time.monotonic() - t0
        time.sleep(poll)
    raise BenchError(f"the replica on :{port} is not in sync after {timeout} s")


@guarded
def race_kv(ctx):
    race = ctx["race"] = new_race("kv", "key-value: brisk-kv vs Redis", "redis")
    s, tmp = ctx["settings"], ctx["tmp"]
    srv_pin, cli_pin = pins(ctx)
    kvdir = tmp / "kv"
    race["started"] = time.strftime("%Y-%m-%d %H:%M:%S %z")
    race["load_start"] = " ".join(open("/proc/loadavg").read().split()[:3])
    mk = {"brisk": kv_maker("brisk", kvdir), "redis": kv_maker("redis", kvdir)}
    race["method"] = [
        "brisk: `build/bin/brisk-kv --port N --bind 127.0.0.1 --appendonly no --save ''`; "
        "redis: `redis-server --port N --bind 127.0.0.1 --save '' --appendonly no` (7.0.15); each "
        "in its own temp directory.",
        f"Servers `{shlex.join(srv_pin) or 'unpinned'}`, load `{shlex.join(cli_pin) or 'unpinned'}`: "
        f"redis-benchmark `-c 50 -d 64` at `-P 16 -n {s.kv_n16}` and `-P 1 -n {s.kv_n1}`, one "
        "command at a time (`-t set`, `-t get`, `-t zadd`, then the EVALSHA and XADD commands "
        "given in each case's load), brisk and Redis alternating on each"
        + (" (the issue's -n 1000000 / 200000, shortened for quick mode)" if s.quick else "") + ".",
        f"EVALSHA: `SCRIPT LOAD \"{EVAL_SCRIPT}\"` in each server first; every call INCRs one key.",
        "XREADGROUP+XACK: bench/lib/xgroup_load.c (built at run time): the stream is refilled "
        f"before each run with {s.kv_n16:,} entries of 3 small fields (`XADD bench:xgroup * "
        f"{' '.join(STREAM_ENTRY)}`, redis-benchmark -P 16, not timed), `XGROUP CREATE "
        "bench:xgroup g 0`, then 16 connections, consumer c<i> each, drain it: every write "
        "carries the XACK of the 10 entries read last time and the next `XREADGROUP GROUP g c<i> "
        "COUNT 10 STREAMS bench:xgroup >`; entries acknowledged per second.",
        "Memory per key: a fresh server each, `redis-benchmark -t set -r 1000000 -n 2000000 -d 64 "
        "-P 16`, then (VmRSS after - VmRSS at start) / DBSIZE. Memory per stream entry: a fresh "
        f"server each, 1,000,000 x `XADD s * {' '.join(STREAM_ENTRY)}` (redis-benchmark -P 16), "
        "(VmRSS after - VmRSS at start) / XLEN.",
    ]
    if not (BIN / "brisk-kv").exists():
        race.update(status="pending", reason="build/bin/brisk-kv is not built yet")
        return race
    kvdir.mkdir()

    def check(srv):
        out = redis_cli(srv.port, "PING")
        if out != "PONG":
            raise BenchError(f"{srv.name} on :{srv.port} answers PING with {out!r}\n{srv.log_tail()}")

    cpu_cases = []  # server CPU per operation, after the throughput cases

    def cpu_case(key, cname, load):
        return new_case(f"{key}-cpu", f"{cname}: server CPU", load, ["brisk", "redis"],
                        metric="us CPU/op", better="lower")

    def cpu_result(r, used_ns, count):
        return {"value": None if r["failed"] else used_ns / count / 1000, "failed": r["failed"]}

    def bench_case(servers, key, cname, load, command, depth, n, target, headline, metric="ops/s",
                   lean=None):
        """lean: the resp_load binary, which then sends `command` (an argv)
        instead of redis-benchmark."""
        case = new_case(key, cname, load, ["brisk", "redis"], metric=metric, target=target,
                        headline=headline)
        cpu = cpu_case(key, cname, load)

        def run_fn(name, srv, duration, warm):
            count = max(10000, n // 10) if warm else n  # warm-up: a tenth
            cmd = command(srv) if callable(command) else command
            c0 = cpu_ns(srv.proc.pid)
            if lean:
                r = run_resp_load(cli_pin, lean, srv.port, count, depth, cmd)
            elif isinstance(cmd, str):
                r = run_redis_benchmark(cli_pin, srv.port, [cmd], count, depth)[cmd.upper()]
            else:
                r = run_redis_benchmark_cmd(cli_pin, srv.port, count, depth, cmd)
            return {key: r, cpu["key"]: cpu_result(r, cpu_ns(srv.proc.pid) - c0, count)}
        run_alternating(s, servers, [case, cpu], run_fn, f"kv: {cname}")
        race["cases"].append(finish_case(case))
        cpu_cases.append(finish_case(cpu))

    servers, shas = [], {}
    try:
        for name in ("brisk", "redis"):
            srv = start(mk[name], srv_pin)
            check(srv)
            servers.append((name, srv))
            shas[name] = resp(srv.port, "SCRIPT", "LOAD", EVAL_SCRIPT)
        if shas["brisk"] != shas["redis"]:
            raise BenchError(f"SCRIPT LOAD: brisk answers {shas['brisk']}, Redis {shas['redis']}")
        sha = shas["brisk"]
        # One command at a time, brisk and Redis alternating on each: the two
        # runs compared are seconds apart.
        for depth, n, target in ((16, s.kv_n16, 1.3), (1, s.kv_n1, 1.1)):
            for t in ("set", "get", "zadd"):
                bench_case(servers, f"{t}-p{depth}", f"{t.upper()} -P {depth}",
                           f"redis-benchmark -c 50 -P {depth} -d 64 -n {n} -t {t}", t, depth, n,
                           target, depth == 16 or t == "get")
        for depth, n in ((16, s.kv_n16), (1, s.kv_n1)):
            bench_case(servers, f"evalsha-p{depth}", f"EVALSHA INCR -P {depth}",
                       f"redis-benchmark -c 50 -P {depth} -n {n} EVALSHA {sha} 1 counter",
                       ["EVALSHA", sha, "1", "counter"], depth, n, 1.3, True)
        # The same commands from bench/lib/resp_load.c, a client that skips
        # replies instead of decoding them: redis-benchmark's one thread is
        # the limit at -P 16 before either server is.
        lean = build_tool(tmp, "resp_load")
        value = "x" * 64  # redis-benchmark -d 64
        lean_cmds = {"set": ["SET", "key:__rand_int__", value], "get": ["GET", "key:__rand_int__"],
                     "zadd": ["ZADD", "myzset", "0", "element:__rand_int__"],
                     "evalsha": ["EVALSHA", sha, "1", "counter"]}
        for depth, n, target in ((16, 3 * s.kv_n16, 1.3), (1, s.kv_n1, 1.1)):
            for t, cmd in lean_cmds.items():
                bench_case(servers, f"{t}-p{depth}-lean", f"{t.upper()} -P {depth}, lean client",
                           f"bench/lib/resp_load.c -c 50 -P {depth} -n {n} "
                           + " ".join("<64 x 'x'>" if a == value else a for a in cmd),
                           cmd, depth, n, 1.3 if t == "evalsha" else target, True,
                           lean=lean)
        for depth, n in ((16, s.kv_n16), (1, s.kv_n1)):
            bench_case(servers, f"xadd-p{depth}", f"XADD -P {depth}",
                       f"redis-benchmark -c 50 -P {depth} -n {n} XADD bench:xadd * f v",
                       ["XADD", "bench:xadd", "*", "f", "v"], depth, n, 1.3, depth == 16)
        tool = build_tool(tmp, "xgroup_load")
        case = new_case("xgroup", "XREADGROUP+XACK, COUNT 10",
                        f"bench/lib/xgroup_load.c: 16 connections drain {s.kv_n16:,} entries",
                        ["brisk", "redis"], metric="entries/s", target=1.3, headline=True)

        xcpu = cpu_case("xgroup", "XREADGROUP+XACK", case["load"])
        xcpu["metric"] = "us CPU/entry"

        def run_xg(name, srv, duration, warm):
            r = run_xgroup(cli_pin, tool, srv.port,
                           max(10000, s.kv_n16 // 10) if warm else s.kv_n16, srv.proc.pid)
            return {"xgroup": r, "xgroup-cpu": {"value": r.get("cpu_us"), "failed": r["failed"]}}
        run_alternating(s, servers, [case, xcpu], run_xg, "kv: XREADGROUP+XACK")
        race["cases"].append(finish_case(case))
        cpu_cases.append(finish_case(xcpu))
    finally:
        for _, srv in servers:
            srv.stop()

    race["cases"] += cpu_cases
    race["method"].append("Server CPU per operation: the on-CPU time of the server's threads "
                          "(/proc/PID/task/*/schedstat) over each run / the operations of the run, "
                          "from the same runs as the throughput. On a shared machine it moves less "
                          "than throughput: other work delays the server without running on its "
                          "clock (cache and memory-bus sharing still show). brisk-kv's busy polling "
                          "(`busy-poll-us 50`) counts as CPU.")

    # memory per key and per stream entry
    mem_cases = [
        (new_case("memory", "RSS per key, 64 B values",
                  "redis-benchmark -t set -r 1000000 -n 2000000 -d 64 -P 16", ["brisk", "redis"],
                  metric="bytes/key", target=0.6, better="lower", headline=True),
         ["-t", "set", "-r", "1000000", "-n", "2000000", "-d", "64"], "DBSIZE"),
        (new_case("memory-stream", "RSS per stream entry, 3 small fields",
                  f"redis-benchmark -n 1000000 -P 16 XADD s * {' '.join(STREAM_ENTRY)}",
                  ["brisk", "redis"], metric="bytes/key", target=0.8, better="lower", headline=True),
         ["-n", "1000000", "XADD", "s", "*"] + STREAM_ENTRY, "XLEN s"),
    ]
    for mem, load, count_cmd in mem_cases:
        for rnd in range(1 if s.quick else min(2, s.rounds)):
            got = {}
            for name in ("brisk", "redis"):
                srv = start(mk[name], srv_pin)
                try:
                    check(srv)
                    before = rss_bytes(srv.proc.pid)
                    subprocess.run(list(cli_pin) + ["redis-benchmark", "-h", "127.0.0.1", "-p",
                                                    str(srv.port), "-P", "16", "-c", "50", "-q"] + load,
                                   capture_output=True, text=True, timeout=600)
                    time.sleep(0.5)
                    after = rss_bytes(srv.proc.pid)
                    keys = int(resp(srv.port, *count_cmd.split()) or 0)
                    if keys:
                        got[name] = {"value": (after - before) / keys, "keys": keys,
                                     "rss_before": before, "rss_after": after, "failed": ""}
                    else:
                        got[name] = {"value": None, "failed": f"{count_cmd} is 0 after the load"}
                    log(f"  kv {mem['key']} {name}: {keys:,} items, RSS {before >> 20} -> "
                        f"{after >> 20} MiB, {got[name]['value'] or 0:.0f} bytes each")
                finally:
                    srv.stop()
            mem["rounds"].append(got)
        race["cases"].append(finish_case(mem))

    kv_replication(ctx, race, kvdir, check)
    # the machine may be shared (other builds and tests on the same cores):
    # the pinning and the alternation keep the comparison fair, not the
    # absolute figures
    race["notes"].append(f"Run started {race['started']}; load average (1, 5, 15 min) "
                         f"{race['load_start']} at its start, "
                         f"{' '.join(open('/proc/loadavg').read().split()[:3])} at the end of the "
                         "load cases.")

    race["notes"].append("Targets: the brisk-kv issue (>= 1.3x Redis on SET, GET and ZADD with -P 16, "
                         ">= 1.1x with -P 1, RSS per key <= 0.6x); the scripting issue (EVALSHA >= 1.3x "
                         "at -P 16 and -P 1); the streams issue (XADD and XREADGROUP+XACK >= 1.3x, RSS "
                         "per entry <= 0.8x); the replication issue (SET -P 16 with a replica >= 1.3x, "
                         "full sync time <= Redis's; BGSAVE side by side, no target).")
    race["notes"].append("redis-benchmark is single-threaded: at -P 16 it can be the limit for both. "
                         "The \"lean client\" cases send the same commands from bench/lib/resp_load.c "
                         "(same -c 50 and -P, the command encoded once, replies skipped rather than "
                         "decoded, one epoll thread): its CPU goes to the kernel, so the server is the "
                         "limit. The value of SET is redis-benchmark's -d 64 (64 x 'x'), the keys are "
                         "the literal `key:__rand_int__` and `element:__rand_int__`, as redis-benchmark "
                         "sends them without -r.")
    if ctx["costs"]:
        spec = {"proto": "resp"}
        for name in ("brisk", "redis"):
            row = measure_costs(name, mk[name], tmp, spec, s)
            row["request"] = "SET/GET alternating, 64 B values"
            row["short"] = "SET/GET"
            race["costs"].append(row)
        for name in ("brisk", "redis"):
            row = measure_costs(name, mk[name], tmp, spec, s, what=("strace",), depth=16)
            row["request"] = "SET/GET alternating, 64 B values, pipelined 16"
            row["short"] = "SET/GET -P 16"
            race["costs"].append(row)
    return race


def kv_replication(ctx, race, kvdir, check):
    """SET -P 16 with one replica attached, full sync of SYNC_KEYS keys to a
    fresh replica, BGSAVE of the same keys (time and peak memory)."""
    s, tmp = ctx["settings"], ctx["tmp"]
    srv_pin, cli_pin = pins(ctx)
    # diskless sync without its 5 s wait for more replicas, on both
    opts = ["--repl-diskless-sync-delay", "0"]
    mk = {n: kv_maker(n, kvdir, opts) for n in ("brisk", "redis")}
    mkr = {n: kv_maker(f"{n}-replica", kvdir) for n in ("brisk", "redis")}
    race["method"] += [
        "Replication: masters with `--repl-diskless-sync-delay 0` (both: the default diskless "
        "sync of Redis 7 without its 5 s wait for more replicas), replicas with the same options "
        "as above; brisk-kv replicates brisk-kv, Redis replicates Redis.",
        f"SET -P 16 with a replica: the replica attached and in sync first, pinned with its master "
        f"(`{shlex.join(srv_pin) or 'unpinned'}`: the load generator keeps its CPU), then "
        f"redis-benchmark `-c 50 -P 16 -d 64 -n {s.kv_n16} -t set` on the master.",
        f"Full sync: the master holds {SYNC_KEYS:,} keys (`key:NNNNNNN`, 64-byte values: hex of "
        "random bytes, loaded with `redis-cli --pipe`); a fresh replica "
        f"(`{shlex.join(cli_pin) or 'unpinned'}`) gets `REPLICAOF 127.0.0.1 PORT`; time until its "
        "INFO says `master_link_status:up` and DBSIZE is the master's (polled every 10 ms).",
        f"BGSAVE: the same {SYNC_KEYS:,} keys; time from BGSAVE until INFO persistence says "
        "`rdb_bgsave_in_progress:0` (polled every 10 ms); peak memory = the largest sum, over the "
        "polls, of the server's VmRSS and its fork child's private resident bytes (smaps_rollup "
        "Private_Clean + Private_Dirty: the pages the child copied or allocated).",
    ]
    # SET -P 16 with a replica
    pairs = []
    try:
        for name in ("brisk", "redis"):
            master = start(mk[name], srv_pin)
            check(master)
            replica = start(mkr[name], srv_pin)
            pairs.append((name, master, replica))
            resp(replica.port, "REPLICAOF", "127.0.0.1", master.port)
            wait_link_up(replica.port, timeout=60)
        case = new_case("set-p16-replica", "SET -P 16, one replica",
                        f"redis-benchmark -c 50 -P 16 -d 64 -n {s.kv_n16} -t set, on the master",
                        ["brisk", "redis"], metric="ops/s", target=1.3, headline=True)

        def run_fn(name, srv, duration, warm):
            n = max(10000, s.kv_n16 // 10) if warm else s.kv_n16
            return {"set-p16-replica": run_redis_benchmark(cli_pin, srv.port, ["set"], n, 16)["SET"]}
        run_alternating(s, [(n, m) for n, m, _ in pairs], [case], run_fn, "kv: SET -P 16, one replica")
        for name, master, replica in pairs:  # the replicas followed
            want = resp(master.port, "GET", "key:__rand_int__")
            if want is not None and resp(replica.port, "GET", "key:__rand_int__") != want:
                time.sleep(1)
                if resp(replica.port, "GET", "key:__rand_int__") != want:
                    race["notes"].append(f"{name}: the replica did not hold the master's value "
                                         "after SET -P 16.")
        race["cases"].append(finish_case(case))
    finally:
        for _, m, r in pairs:
            r.stop()
            m.stop()

    # full sync and BGSAVE of SYNC_KEYS keys
    data = sync_data_file(tmp)
    masters = []
    sync = new_case("fullsync", f"full sync, {SYNC_KEYS // 1000000}M keys x 64 B",
                    "REPLICAOF on a fresh replica until link up and all keys", ["brisk", "redis"],
                    metric="s", target=1.0, better="lower", headline=True)
    bg_time = new_case("bgsave-time", f"BGSAVE time, {SYNC_KEYS // 1000000}M keys",
                       "BGSAVE until rdb_bgsave_in_progress:0", ["brisk", "redis"], metric="s",
                       better="lower", headline=True)
    bg_mem = new_case("bgsave-peak", f"BGSAVE peak memory, {SYNC_KEYS // 1000000}M keys",
                      "max(server VmRSS + child private bytes)", ["brisk", "redis"], metric="MiB",
                      better="lower", headline=True)
    try:
        for name in ("brisk", "redis"):
            m = start(mk[name], srv_pin)
            check(m)
            load_pipe(cli_pin, m.port, data)
            if resp(m.port, "DBSIZE") != SYNC_KEYS:
                raise BenchError(f"{name}: DBSIZE {resp(m.port, 'DBSIZE')} after loading {SYNC_KEYS}")
            masters.append((name, m))
        for rnd in range(s.rounds):
            got = {}
            for name, m in masters:
                rep = start(mkr[name], cli_pin)
                try:
                    t0 = time.monotonic()
                    resp(rep.port, "REPLICAOF", "127.0.0.1", m.port)
                    wait_link_up(rep.port, keys=SYNC_KEYS)
                    got[name] = {"value": time.monotonic() - t0, "failed": ""}
                except BenchError as e:
                    got[name] = {"value": None, "failed": str(e)}
                finally:
                    rep.stop(timeout=30)
                log(f"  kv full sync round {rnd + 1} {name}: "
                    + (f"{got[name]['value']:.2f} s" if got[name]["value"] else got[name]["failed"]))
            sync["rounds"].append(got)
            time.sleep(0.5)
        for rnd in range(s.rounds):
            gt, gm = {}, {}
            for name, m in masters:
                pid = m.proc.pid
                while info_field(m.port, "persistence", "rdb_bgsave_in_progress") != "0":
                    time.sleep(0.05)
                peak = rss_bytes(pid)
                t0 = time.monotonic()
                resp(m.port, "BGSAVE")
                while True:
                    kids = children(pid)
                    peak = max(peak, rss_bytes(pid) + sum(private_bytes(k) for k in kids))
                    if info_field(m.port, "persistence", "rdb_bgsave_in_progress") == "0":
                        break
                    time.sleep(0.01)
                secs = time.monotonic() - t0
                ok = info_field(m.port, "persistence", "rdb_last_bgsave_status") == "ok"
                gt[name] = {"value": secs if ok else None, "failed": "" if ok else "BGSAVE failed"}
                gm[name] = {"value": peak / (1 << 20), "failed": ""}
                log(f"  kv BGSAVE round {rnd + 1} {name}: {secs:.2f} s, peak {peak >> 20} MiB"
                    + ("" if ok else " (FAILED)"))
            bg_time["rounds"].append(gt)
            bg_mem["rounds"].append(gm)
    finally:
        for _, m in masters:
            m.stop(timeout=30)
    for c in (sync, bg_time, bg_mem):
        race["cases"].append(finish_case(c))


# ---------------------------------------------------------------- rest

REST_SEED = 1000
REST_BACKENDS = (("sqlite", "SQLite"), ("postgresql", "PostgreSQL"))
# reads first, bulk-insert last: every read runs on the seeded database
REST_RUN_ORDER = ("categories", "foods-list", "template-full", "bulk-insert")


def latency_summary(case):
    """Per percentile: each server's median (min-max) over the rounds and
    the pair-by-pair ratio peer / brisk (> 1: brisk is faster)."""
    a, b = case["contenders"][:2]
    lat = {}
    for pct in rest_load.PERCENTILES:
        k = f"{pct}_ms"
        ok = [r for r in case["rounds"]
              if all(n in r and not r[n].get("failed") and r[n].get(k) for n in (a, b))]
        ent = {n: summarize([r[n].get(k) for r in case["rounds"]
                             if n in r and not r[n].get("failed")]) for n in (a, b)}
        ent["ratio"] = summarize([r[b][k] / r[a][k] for r in ok])
        lat[pct] = ent
    case["latency"] = lat
    ratios = [lat[p]["ratio"] for p in rest_load.PERCENTILES]
    case["latency_met"] = all(r["median"] > 1 for r in ratios) if all(ratios) else None
    return case


def rest_backend(ctx, race, backend, label, peer_sh, rest_dir):
    """One database: both servers on fresh databases, the four endpoints
    A B A B; appends the cases to race["cases"], the database facts to
    race["databases"]."""
    s = ctx["settings"]
    srv_pin, cli_pin = pins(ctx)
    info = {"key": backend, "name": label, "status": "ok", "reason": "", "size": {}}
    race["databases"].append(info)
    workdir = rest_dir / backend
    workdir.mkdir()
    templates = max(1, REST_SEED // 10)
    pg, servers = None, []
    try:
        if backend == "sqlite":
            urls = {n: f"sqlite:{workdir / (n + '.db')}" for n in ("brisk", "fastapi")}
            info["server"] = "embedded (each server's own file)"
        else:
            bindir = rest_load.postgres_bindir()
            if not bindir:
                info.update(status="skipped",
                            reason="no PostgreSQL server binaries (initdb, pg_ctl under "
                                   "/usr/lib/postgresql/*/bin): `apt-get install postgresql` to race on it")
                log(f"rest: PostgreSQL skipped: {info['reason']}")
                return
            pg = rest_load.PgCluster(bindir, workdir, free_port(), prefix=srv_pin).start()
            info["server"] = f"{pg.version()} on 127.0.0.1:{pg.port} (throwaway cluster)"
            log(f"rest: {info['server']}, data in {pg.dir}")
            urls = {n: pg.create_db(f"foods_{n}") for n in ("brisk", "fastapi")}
        mk = {
            "brisk": simple_server("brisk", lambda p: [
                str(BIN / "brisk-foods"), "--listen", f"127.0.0.1:{p}", "--db", urls["brisk"],
                "--workers", "1", "--seed", str(REST_SEED)], workdir),
            "fastapi": simple_server("fastapi", lambda p: [
                "bash", str(peer_sh), "--listen", f"127.0.0.1:{p}", "--db", urls["fastapi"],
                "--workers", "1", "--seed", str(REST_SEED)], workdir),
        }
        for name in ("brisk", "fastapi"):
            srv = start(mk[name], srv_pin, timeout=120)
            servers.append((name, srv))
            log(f"rest {backend}: {name}: {shlex.join(srv.argv)} on :{srv.port}")

        def stats(name):
            if pg:
                return pg.stats(f"foods_{name}")
            return rest_load.sqlite_stats(urls[name].split(":", 1)[1])
        for name, _ in servers:
            if pg:
                pg.settle(f"foods_{name}")
            size, foods = stats(name)
            info["size"][name] = {"start_bytes": size, "start_foods": foods}
        for ep in REST_RUN_ORDER:
            _, cname, request, target = next(e for e in rest_load.ENDPOINTS if e[0] == ep)
            answers = {}
            for name, srv in servers:
                try:
                    answers[name] = rest_load.check_endpoint(srv.port, ep, templates)
                except (rest_load.RestError, OSError) as e:
                    raise BenchError(f"{label}: {name} on :{srv.port} answers {ep} wrong: {e}\n"
                                     f"{srv.log_tail()}")
            diff = rest_load.first_difference(answers["brisk"], answers["fastapi"])
            if diff:
                race["notes"].append(f"{label}, {cname}: the two servers' answers differ ({diff}).")
            request = request.replace("TEMPLATES", str(templates))
            case = new_case(f"{backend}-{ep}", f"{label}, {cname}",
                            f"wrk -t1 -c50 -d{s.duration}s, `{request}`", ["brisk", "fastapi"],
                            target=target, headline=True)
            case.update(db=backend, db_name=label, endpoint=ep, request=request)

            def run_fn(name, srv, duration, warm, ep=ep, key=case["key"]):
                return {key: rest_load.run_wrk(cli_pin, srv.port, ep, duration, templates)}
            run_alternating(s, servers, [case], run_fn, f"rest {backend}: {cname}")
            race["cases"].append(latency_summary(finish_case(case)))
            lat = case["latency"]
            log(f"  rest {backend}: {cname}: FastAPI/brisk latency "
                + ", ".join(f"{p} {lat[p]['ratio']['median']:.2f}x" if lat[p]["ratio"] else f"{p} —"
                            for p in rest_load.PERCENTILES))
    except BenchError as e:
        info.update(status="failed", reason=str(e).strip())
        log(f"rest: {label} FAILED: {e}")
    except Exception as e:  # noqa: BLE001 (the other database still runs)
        info.update(status="failed", reason=f"{e.__class__.__name__}: {e}".strip())
        log(f"rest: {label} FAILED: {traceback.format_exc()}")
    finally:
        for _, srv in servers:
            srv.stop()
        for name, _ in servers:
            try:
                size, foods = (pg.stats(f"foods_{name}") if pg else
                               rest_load.sqlite_stats(urls[name].split(":", 1)[1]))
                info["size"].setdefault(name, {}).update(end_bytes=size, end_foods=foods)
            except Exception as e:  # noqa: BLE001 (a figure of the report, not of the race)
                log(f"rest: {label}: no database size for {name}: {e}")
        if pg:
            pg.close()


@guarded
def race_rest(ctx):
    race = ctx["race"] = new_race("rest", "REST API: brisk-foods vs FastAPI (SQLite, PostgreSQL)",
                                  "fastapi")
    s, tmp = ctx["settings"], ctx["tmp"]
    race["databases"] = []
    peer_sh = PEERS / "foods-fastapi" / "run.sh"
    missing = []
    if not (BIN / "brisk-foods").exists():
        missing.append("build/bin/brisk-foods is not built yet")
    if not (peer_sh.exists() and (PEERS / "fastapi_foods.py").exists()):
        missing.append("the FastAPI peer (bench/peers/foods-fastapi/run.sh, "
                       "bench/peers/fastapi_foods.py) does not exist yet")
    if missing:
        race.update(status="pending", reason="; ".join(missing))
        race["method"] = ["Planned (brisk-foods issue): 50 concurrent connections per endpoint "
                          "(categories, foods-list, bulk-insert of 100 foods, template-full), "
                          "brisk-foods vs the FastAPI peer with the same workers, on SQLite and "
                          "PostgreSQL; req/s and p50/p95/p99."]
        return race
    if not shutil.which("wrk"):
        raise BenchError("wrk is not installed (bench/run.sh installs it)")
    log("rest: making sure the FastAPI peer's packages are installed")
    p = subprocess.run(["bash", str(peer_sh), "--install"], capture_output=True, text=True,
                       timeout=900, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        raise BenchError("the FastAPI peer's packages (bench/requirements.txt) are not installed: "
                         + (p.stderr or p.stdout).strip()[-1500:])
    venv = Path(os.environ.get("FOODS_FASTAPI_VENV") or PEERS.parent / ".venv")
    vers = rest_load.peer_versions(venv / "bin" / "python")
    race["versions"] = vers
    srv_pin, cli_pin = pins(ctx)
    templates = max(1, REST_SEED // 10)
    race["method"] = [
        f"brisk: `build/bin/brisk-foods --listen 127.0.0.1:PORT --db URL --workers 1 --seed {REST_SEED}` "
        "(its default pool: SQLite one writer connection, PostgreSQL 4 connections); FastAPI: "
        f"`bench/peers/foods-fastapi/run.sh --listen 127.0.0.1:PORT --db URL --workers 1 --seed {REST_SEED}` "
        "(bench/peers/fastapi_foods.py: uvicorn, one process, uvloop + httptools, a pool of 4 "
        "connections: aiosqlite / asyncpg).",
        f"Each server gets its own fresh database and seeds it itself with `--seed {REST_SEED}`: "
        f"{REST_SEED:,} foods in 20 categories, {templates} templates of 5-15 items (the same "
        "generator in both, so the same rows, and the same SQL: one JOIN for template-full).",
        f"Servers (and PostgreSQL's processes) `{shlex.join(srv_pin) or 'unpinned'}`, load "
        f"`{shlex.join(cli_pin) or 'unpinned'}`: `wrk -t1 -c50 -d{s.duration}s --timeout "
        f"{rest_load.TIMEOUT_S}s -s bench/lib/rest.lua` (50 connections = the original's 50 "
        "virtual users, each sending its next request as soon as the last is answered); "
        "rest.lua's done() prints p50/p95/p99 from wrk's latency histogram.",
        "Endpoints: " + "; ".join(f"**{e[1]}** `{e[2].replace('TEMPLATES', str(templates))}`"
                                  for e in rest_load.ENDPOINTS) + ".",
        f"Before each endpoint both servers are asked it once and their answers checked (status, "
        f"JSON shape) and compared; then a {s.warmup} s warm-up each and {s.rounds} round(s) "
        "brisk, FastAPI. The reads run first, bulk-insert last, so every read sees the seeded "
        "database.",
        "Ratios, round by round: throughput brisk / FastAPI; latency FastAPI / brisk. Both > 1 "
        "mean brisk is better.",
        "PostgreSQL (when its server binaries are installed): a throwaway cluster, `initdb` in a "
        "temp dir as the postgres user, started on a free loopback port with "
        "`synchronous_commit=off` (fsync on; the counterpart of SQLite's WAL with "
        "synchronous=NORMAL), one database per server, stopped and removed afterwards.",
    ]
    if vers:
        race["method"].append("Peer: " + ", ".join(f"{k} {v}" for k, v in vers.items()) + ".")
    rest_dir = tmp / "rest"
    rest_dir.mkdir()
    for backend, label in REST_BACKENDS:
        log(f"rest: ===== {label}")
        rest_backend(ctx, race, backend, label, peer_sh, rest_dir)
    order = {e[0]: i for i, e in enumerate(rest_load.ENDPOINTS)}
    dbs = [b for b, _ in REST_BACKENDS]
    race["cases"].sort(key=lambda c: (dbs.index(c["db"]), order[c["endpoint"]]))
    for info in race["databases"]:
        if info["status"] == "skipped":
            race["notes"].append(f"{info['name']}: skipped: {info['reason']}.")
    race["notes"].append("The databases grow during bulk-insert (100 foods per request, each "
                         "server into its own database, so the faster server's grows more): the "
                         "sizes after seeding and at the end are under each database's tables. "
                         "The reads run before, on the seeded data only.")
    race["notes"].append("Targets from the brisk-foods issue: categories and foods-list >= 10x "
                         "FastAPI's req/s, bulk-insert >= 3x, template-full >= 5x; and better "
                         "latency at every percentile on all four endpoints, on both databases.")
    race["notes"].append("wrk is one thread on one core: against brisk on the cheapest endpoints it "
                         "can be the limit (then the ratio is a floor).")
    failed = [i for i in race["databases"] if i["status"] == "failed"]
    if failed:
        race["status"] = "failed"
        race["reason"] = "\n".join(f"{i['name']}: {i['reason']}" for i in failed)
    return race


# ---------------------------------------------------------------- https

HTTPS_CONNS = 50     # every case: 50 connections (h2load -c, wrk -c, tls_conns slots)
HTTPS_STREAMS = 10   # h2load -m: streams in flight per connection


def make_cert(dirpath):
    """A self-signed ECDSA P-256 certificate for 127.0.0.1 / localhost, made
    for this run and served by every contender."""
    key, cert = dirpath / "key.pem", dirpath / "cert.pem"
    p = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                        "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                        "-keyout", str(key), "-out", str(cert)],
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise BenchError(f"openssl could not make the certificate: {p.stderr.strip()}")
    os.chmod(key, 0o644)  # read by every server, whatever user it runs as
    return cert, key


def https_server(name, tmp, root, cert, key):
    """A factory port -> Server for brisk, nginx or h2o from
    bench/peers/{name}-https.conf.in (rendered per port in the temp dir)."""
    template = (PEERS / f"{name}-https.conf.in").read_text()

    def make(port):
        prefix = tmp / f"https-{name}-{port}"
        prefix.mkdir()
        root_user = os.geteuid() == 0
        user = {"nginx": "user root;" if root_user else "",
                "h2o": "user: root" if root_user else ""}.get(name, "")
        conf = (template.replace("@USER_DIRECTIVE@", user).replace("@PREFIX@", str(prefix))
                .replace("@PORT@", str(port)).replace("@ROOT@", str(root))
                .replace("@CERT@", str(cert)).replace("@KEY@", str(key)))
        conf_path = prefix / {"brisk": "brisk.conf", "nginx": "nginx.conf", "h2o": "h2o.conf"}[name]
        conf_path.write_text(conf)
        if name == "brisk":
            argv = [str(BIN / "brisk"), "-c", str(conf_path), "--workers", "1",
                    "--access-log", "off"]
            return Server(name, argv, signal.SIGTERM, workdir=prefix)
        if name == "nginx":
            argv = [sb.NGINX, "-e", str(prefix / "error.log"), "-p", str(prefix), "-c", str(conf_path)]
            return Server(name, argv, signal.SIGQUIT, pidfile=prefix / "nginx.pid", workdir=prefix)
        return Server(name, [sb.H2O, "-c", str(conf_path)], signal.SIGTERM, workdir=prefix)
    return make


def check_https(name, srv, root, tmp):
    """Before measuring: each file over HTTPS/1.1 and the small one over h2
    (curl: status 200, protocol, the exact bytes), then h2load's own check
    (-n 200 over 2 connections: 200 succeeded, 200 2xx, 0 failed, ALPN h2)."""
    from harness import h2load_failed, parse_h2load
    for f, proto in ((sb.SMALL, "2"), (sb.SMALL, "1.1"), (sb.BIG, "1.1")):
        url = f"https://127.0.0.1:{srv.port}/{f}"
        body = tmp / "https-verify.body"
        p = subprocess.run(["curl", "-sSk", "--max-time", "10", "--http2" if proto == "2" else "--http1.1",
                            "-o", str(body), "-w", "%{http_version} %{http_code}", url],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise BenchError(f"{name}: curl {url} failed: {p.stderr.strip()}\n{srv.log_tail()}")
        got = p.stdout.split()
        problems = []
        if got != [proto, "200"]:
            problems.append(f"HTTP/{got[0] if got else '?'} {got[1] if len(got) > 1 else '?'}, "
                            f"want HTTP/{proto} 200")
        if body.read_bytes() != (root / f).read_bytes():
            problems.append(f"body differs ({body.stat().st_size} bytes)")
        if problems:
            raise BenchError(f"{name} serves /{f} over HTTP/{proto} wrong: " + "; ".join(problems))
    p = subprocess.run(["h2load", "-n200", "-c2", "-m10", f"https://127.0.0.1:{srv.port}/{sb.SMALL}"],
                       capture_output=True, text=True, timeout=60)
    r = parse_h2load(p.stdout)
    why = h2load_failed(p.returncode, r)
    if not why and r["succeeded"] != 200:
        why = f"{r['succeeded']} succeeded of 200"
    if why:
        raise BenchError(f"{name}: h2load -n200 -c2 -m10 over h2: {why}\n{p.stdout[-1500:]}")
    log(f"https: {name} on :{srv.port} answers right over HTTP/2 and HTTP/1.1 (h2load: 200 "
        f"succeeded, 200 2xx, {r['tls']} {r['cipher']}, {r['key']})")


def tree_cpu_seconds(pid):
    """User + system CPU time of a process and all its descendants (nginx's
    worker, h2o's threads), from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    stats = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                f = (d / "stat").read_text().rsplit(")", 1)[1].split()
                stats[int(d.name)] = (int(f[1]), int(f[11]) + int(f[12]))
            except (OSError, ValueError, IndexError):
                continue
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += stats.get(p, (0, 0))[1]
        todo += [c for c, (pp, _) in stats.items() if pp == p]
    return total / tick


def with_server_cpu(fn, key, cpu_key):
    """Wraps a run: also the server's CPU time during it (cpu_key: CPU
    microseconds per connection or request, from the client's count: its
    connections, its requests, or else its rate times the duration)."""
    def run(name, srv, duration, warm):
        c0 = tree_cpu_seconds(srv.proc.pid)
        res = fn(name, srv, duration, warm)
        cpu = tree_cpu_seconds(srv.proc.pid) - c0
        r = res[key]
        n = r.get("connections") or r.get("requests") or (r.get("value") or 0) * duration
        if r.get("failed") or not n:
            res[cpu_key] = {"value": None, "failed": r.get("failed") or "nothing counted"}
        else:
            res[cpu_key] = {"value": cpu * 1e6 / n, "failed": "", "p50": None, "p99": None,
                            "errors": "", "server_cpu_s": round(cpu, 2)}
        return res
    return run


def build_tls_tool(tmp, name):
    """Builds bench/lib/NAME.c (an https race client, against OpenSSL) once per run."""
    out = tmp / name
    if not out.exists():
        p = subprocess.run(["cc", "-O2", "-Wall", "-o", str(out), str(LIB / f"{name}.c"),
                            "-lssl", "-lcrypto"], capture_output=True, text=True)
        if p.returncode != 0:
            raise BenchError(f"cannot build bench/lib/{name}.c (libssl-dev): {p.stderr.strip()}")
    return out


@guarded
def race_https(ctx):
    race = ctx["race"] = new_race("https", "HTTPS (TLS 1.3, HTTP/2 and HTTP/1.1): brisk vs nginx and h2o",
                                  "nginx")
    s, tmp = ctx["settings"], ctx["tmp"]
    if not (BIN / "brisk").exists():
        race.update(status="pending", reason="build/bin/brisk is not built")
        return race
    for tool, pkg in (("h2load", "nghttp2-client"), ("wrk", "wrk"), ("openssl", "openssl"),
                      ("curl", "curl"), ("cc", "build-essential")):
        if not shutil.which(tool):
            raise BenchError(f"{tool} is not installed (bench/run.sh installs {pkg})")
    srv_pin, cli_pin = pins(ctx)
    base = tmp / "https"
    base.mkdir()
    root = base / "www"
    sb.make_docroot(root)
    cert, key = make_cert(base)
    tool = build_tls_tool(base, "tls_conns")
    lean = build_tls_tool(base, "h2_load")
    names = with_available(race, ["brisk", "nginx", "h2o"])
    mk = {n: https_server(n, base, root, cert, key) for n in names}
    small, big = f"/{sb.SMALL}", f"/{sb.BIG}"
    race["method"] = [
        "The files of the static race (117-byte `index.html`, 1 MiB `1m.bin`) over TLS from "
        "three servers, one worker each, configured side by side: brisk "
        "`build/bin/brisk -c brisk.conf --workers 1 --access-log off` "
        "(bench/peers/brisk-https.conf.in: `listen = 127.0.0.1:PORT ssl`), nginx "
        "(bench/peers/nginx-https.conf.in: `worker_processes 1`, `listen ... ssl http2`, "
        "access_log off), h2o (bench/peers/h2o-https.conf.in: `num-threads: 1`, no access log). "
        "All three: TLS 1.2 and 1.3, session tickets on, HTTP/2 by ALPN, and the same "
        "certificate, a self-signed ECDSA P-256 one made for the run (`openssl req -x509 "
        "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1`).",
        "Before the cases each server is checked: curl over h2 and HTTP/1.1 (status, protocol, "
        "exact bytes of both files) and `h2load -n200 -c2 -m10` (200 succeeded, 200 2xx, ALPN h2); "
        "every h2load run of the race fails unless its failed and errored counts are 0, its "
        "statuses all 2xx and its protocol h2.",
        f"Servers `{shlex.join(srv_pin) or 'unpinned'}`, load `{shlex.join(cli_pin) or 'unpinned'}`; "
        f"warm-up {s.warmup} s each, then {s.rounds} round(s) brisk, nginx, h2o; ratios round by "
        "round.",
        f"h2: `h2load -t1 -c{HTTPS_CONNS} -m{HTTPS_STREAMS} -D {s.duration}` (TLS 1.3, ALPN h2), "
        "req/s as h2load reports it.",
        f"h2, lean client: bench/lib/h2_load.c (built at run time; one thread, epoll), the same "
        f"{HTTPS_CONNS} connections and {HTTPS_STREAMS} streams in flight on each, TLS 1.3, ALPN "
        "h2 (a run fails without it). h2load's single thread costs about 13,500 user-space "
        "instructions per request, more than brisk or h2o spend, so on two cores it was the "
        "limit for both; this one costs about 2,000 (callgrind; about 7,000 against nginx, whose "
        "responses come in more TLS records), so the server is. What it skips: the "
        "request's HEADERS frame is HPACK-encoded once (static-table :method and :scheme, "
        ":path and :authority literals without indexing) and only the stream id changes; "
        "responses are not decoded: it reads frame headers, checks that a response's header "
        "block starts with `:status 200` as static index 8 (0x88, what all three send), sums "
        "DATA lengths (117 bytes a stream, checked) and counts a request at END_STREAM; no "
        "other header is read. It acknowledges SETTINGS and PING, sends WINDOW_UPDATEs (16 MiB "
        "windows), honours the server's SETTINGS_MAX_CONCURRENT_STREAMS, and counts any other "
        "status, a wrong length, RST_STREAM or GOAWAY as an error (a run fails on any). The "
        "clock starts once every connection has the server's SETTINGS; value = requests "
        "completed per second.",
        f"HTTPS/1.1: `wrk -t1 -c{HTTPS_CONNS} -d{s.duration}s` keep-alive (wrk offers no ALPN: "
        "HTTP/1.1; TLS 1.3).",
        "With one client thread on a core of its own, h2load and wrk are the limit on two cores "
        "(100% CPU) and the server idles part of the time; so these cases also give each "
        "server's CPU time per request (/proc, user + system, over the same runs), and two more "
        "run the client with two threads, not pinned, beside the server (still pinned to its "
        "core): the machine shared, as a server shares it with its clients' work, where a "
        "server that spends less per request leaves the client more CPU.",
        f"New connections: bench/lib/tls_conns.c (built at run time; one thread, epoll, "
        f"{HTTPS_CONNS} connections at once), each connection one TLS 1.3 handshake (the client "
        "allows 1.3 only), one `GET /index.html` with `Connection: close`, the reply read "
        "(status 200, 117 bytes), close_notify and close, then the next: value = connections "
        "per second. Full handshakes: no session offered. Resumption: each of the 50 slots offers "
        "the last session ticket the server sent it (TLS 1.3 PSK with (EC)DHE), once: a ticket "
        "is used for one connection only (RFC 8446 C.4; OpenSSL's client and browsers do the "
        "same), so a server that issues no new ticket on a resumed connection makes the slot's "
        "next handshake a full one. A run fails when any connection fails, or when none is "
        "resumed. wrk cannot resume sessions and `openssl s_time` makes one connection at a "
        "time, so one client does both, with and without tickets.",
    ]

    def h2_run(key, path, threads=1, pin=cli_pin):
        def fn(name, srv, duration, warm):
            return {key: run_h2load(pin, f"https://127.0.0.1:{srv.port}{path}", duration,
                                    conns=HTTPS_CONNS, streams=HTTPS_STREAMS, threads=threads)}
        return with_server_cpu(fn, key, key + "-cpu")

    def lean_run(key, path):
        def fn(name, srv, duration, warm):
            return {key: run_h2_load(cli_pin, lean, srv.port, path, duration, conns=HTTPS_CONNS,
                                     streams=HTTPS_STREAMS, expect_len=sb.SMALL_SIZE)}
        return fn

    def wrk_run(key, path, threads=1, pin=cli_pin):
        def fn(name, srv, duration, warm):
            return {key: run_wrk(pin, f"https://127.0.0.1:{srv.port}{path}", duration,
                                 threads=threads, conns=HTTPS_CONNS)}
        return with_server_cpu(fn, key, key + "-cpu")

    def conn_run(key, resume):
        def fn(name, srv, duration, warm):
            return {key: run_tls_conns(cli_pin, tool, srv.port, small, duration, resume,
                                       conns=HTTPS_CONNS, expect_len=sb.SMALL_SIZE)}
        return with_server_cpu(fn, key, key + "-cpu")

    d = s.duration
    cases = [
        ("h2-small", "h2, 117 B, h2load -c50 -m10",
         f"h2load -t1 -c{HTTPS_CONNS} -m{HTTPS_STREAMS} -D {d}, `{small}`", h2_run("h2-small", small),
         "req/s", 1.3),
        ("h2-small-lean", f"h2, 117 B, lean client -c{HTTPS_CONNS} -m{HTTPS_STREAMS}",
         f"bench/lib/h2_load.c {HTTPS_CONNS} connections, {HTTPS_STREAMS} streams each, {d} s, "
         f"`{small}`", lean_run("h2-small-lean", small), "req/s", 1.3),
        ("h1-small", "HTTPS/1.1, 117 B, wrk keep-alive", f"wrk -t1 -c{HTTPS_CONNS} -d{d}s, `{small}`",
         wrk_run("h1-small", small), "req/s", 1.0),
        ("conn-full", "new TLS 1.3 connections, resumption off",
         f"tls_conns {HTTPS_CONNS} at once, {d} s, `{small}`, no session offered",
         conn_run("conn-full", False), "conn/s", 1.0),
        ("conn-resume", "new TLS 1.3 connections, resumption on",
         f"tls_conns {HTTPS_CONNS} at once, {d} s, `{small}`, each ticket offered once",
         conn_run("conn-resume", True), "conn/s", 1.0),
        ("h1-big", "HTTPS/1.1, 1 MiB, wrk keep-alive", f"wrk -t1 -c{HTTPS_CONNS} -d{d}s, `{big}`",
         wrk_run("h1-big", big), "req/s", 1.0),
        # The machine shared: the client's two threads unpinned, so they run
        # beside the server on its core too; a server that costs less per
        # request leaves the client more CPU.
        ("h2-small-2t", "h2, 117 B, h2load -t2 -c50 -m10, client unpinned",
         f"h2load -t2 -c{HTTPS_CONNS} -m{HTTPS_STREAMS} -D {d}, `{small}`, not pinned",
         h2_run("h2-small-2t", small, threads=2, pin=[]), "req/s", 1.0),
        ("h1-small-2t", "HTTPS/1.1, 117 B, wrk -t2, client unpinned",
         f"wrk -t2 -c{HTTPS_CONNS} -d{d}s, `{small}`, not pinned",
         wrk_run("h1-small-2t", small, threads=2, pin=[]), "req/s", 1.0),
    ]
    servers = []
    try:
        for name in names:
            srv = start(mk[name], srv_pin)
            servers.append((name, srv))
            log(f"https: {name}: {shlex.join(srv.argv)} on :{srv.port}")
        for name, srv in servers:
            check_https(name, srv, root, base)
        for key, cname, load, fn, metric, h2o_target in cases:
            for name, srv in servers:
                if srv.proc.poll() is not None:
                    raise BenchError(f"{name} has exited ({srv.proc.returncode})\n{srv.log_tail()}")
            refs = {"h2o": h2o_target} if "h2o" in names else {}
            case = new_case(key, cname, load, names, metric=metric, target=1.0, headline=True,
                            ref_targets=refs)
            both = [case]
            if key != "h2-small-lean":
                # the client can be the limit here (one h2load, wrk or
                # tls_conns thread): the server's CPU time per connection or
                # request says what each costs the server
                per = "connection" if key.startswith("conn-") else "request"
                both.append(new_case(key + "-cpu", f"{cname}: server CPU per {per}",
                                     "the same runs: server CPU time (/proc, user + system, all "
                                     f"threads and processes) / {per}s", names,
                                     metric="µs/conn" if per == "connection" else "µs/req",
                                     target=1.0, better="lower", headline=True,
                                     ref_targets={n: 1.0 for n in refs}))
            run_alternating(s, servers, both, fn, f"https: {cname}")
            for c in both:
                race["cases"].append(finish_case(c))
    finally:
        for _, srv in servers:
            srv.stop()
    seen = {}
    for c in race["cases"]:
        for rnd in c["rounds"]:
            for n, r in rnd.items():
                if r.get("cipher"):
                    tls = r.get("tls") or "TLSv1.3"
                    seen.setdefault(n, set()).add(f"{tls} {r['cipher']} {r.get('key') or ''}".strip())
    if seen:
        race["notes"].append("Negotiated (h2load's, h2_load's and tls_conns' reports): " + "; ".join(
            f"{n}: {', '.join(sorted(v))}" for n, v in seen.items()) + ".")
    for c in race["cases"]:
        if c["key"] == "conn-resume":
            tot = {}
            for rnd in c["rounds"]:
                for n, r in rnd.items():
                    if r.get("later"):
                        t = tot.setdefault(n, [0, 0])
                        t[0] += r["resumed"]
                        t[1] += r["later"]
            if tot:
                race["notes"].append(
                    "Resumption on: connections resumed, of those after each slot's first (one "
                    "ticket per connection: a server must send a new ticket on a resumed "
                    "connection for the next one to resume too): " +
                    "; ".join(f"{n} {a:,} of {b:,} ({100 * a / b:.0f}%)" for n, (a, b) in tot.items())
                    + ".")
    race["notes"].append("Targets from the HTTPS issue (#16): ahead of nginx and h2o in every case "
                         "(>= 1.0x both), and >= 1.3x h2o on h2 with the small file.")
    race["notes"].append("A new-connection case costs both ends a key exchange and the client a "
                         "signature check per connection: with one client thread the client can be "
                         "the limit (see client idle in the rounds), and then the ratios are floors.")
    race["notes"].append("This kernel's kernel TLS (the `tls` ULP) decides whether brisk sends the "
                         "1 MiB file with SSL_sendfile; without it every server encrypts in user space.")
    if ctx["costs"]:
        what = ("strace",) if s.quick else ("strace", "callgrind")
        if s.quick:
            race["notes"].append("Quick mode counts syscalls only (no callgrind) in this race.")
        # h2 as the race loads it (h2load, 10 streams in flight per
        # connection), HTTPS/1.1 as the other races count (1 in flight)
        for proto, label, short, depth in (("h2", "over h2", "h2 117 B", HTTPS_STREAMS),
                                           ("https", "over HTTPS/1.1", "HTTPS/1.1 117 B", 1)):
            spec = {"proto": proto, "path": small, "expect_len": sb.SMALL_SIZE}
            for name in names:
                row = measure_costs(name, mk[name], base, spec, s,
                                    what=what, depth=depth)
                row["request"] = f"`GET /index.html` {label} (117 B)"
                row["short"] = short
                if proto == "h2":
                    row["client"] = (f"h2load -c{s.cost_conns} -m{depth}: {s.cost_conns} "
                                     f"connections, {depth} streams in flight each")
                race["costs"].append(row)
    return race


RACES = {"hello": race_hello, "static": race_static, "echo": race_echo, "kv": race_kv,
         "rest": race_rest, "https": race_https}
