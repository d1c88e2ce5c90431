"""Shared pieces of the `make bench` harness (bench/run.py): run settings,
servers, load generators, the alternating A B A B race runner, statistics,
and the per-request cost counts (strace and callgrind).

Servers come from bench/lib/static_bench.py (the Server class: own session,
graceful stop, kill of the whole group as a last resort, registered in
static_bench.PROCS so that the driver stops everything it started).
"""
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import static_bench as sb  # noqa: E402

REPO = sb.REPO
BENCH = sb.BENCH
BIN = sb.BIN_DIR  # build/bin, or $BENCH_BIN_DIR
LIB = BENCH / "lib"
PEERS = BENCH / "peers"
BenchError = sb.BenchError
Server = sb.Server
free_port = sb.free_port


T0 = time.monotonic()


def log(msg):
    print(f"[bench {time.monotonic() - T0:4.0f}s] {msg}", file=sys.stderr, flush=True)


class Settings:
    """Durations and counts of one run; quick mode shortens everything."""

    def __init__(self, quick, rounds=None, duration=None):
        self.quick = quick
        self.rounds = rounds or (1 if quick else 3)
        self.duration = duration or (2 if quick else 5)
        self.warmup = 1
        # httperf sweep: offered connection rates (each connection makes
        # SWEEP_CALLS requests), seconds per point
        self.sweep_calls = 10
        self.sweep_rates = ([1000, 3000, 6000, 10000] if quick else
                            [1000, 2000, 3000, 4000, 5000, 6000, 8000, 10000, 12000, 14000])
        self.sweep_seconds = 1.5 if quick else 3
        # redis-benchmark request counts (the kv issue: -n 1000000 / 200000)
        self.kv_n16 = 300000 if quick else 1000000
        self.kv_n1 = 40000 if quick else 200000
        # cost counts: CONNS connections, all busy at once
        self.cost_conns = 10
        self.cost_rounds = 200          # 200 rounds x 10 connections = 2,000 requests
        self.cost_warm_rounds = 50      # both runs start with 500 warm-up requests (callgrind)


def cpu_pins():
    return sb.cpu_pins()


def cmd_output(argv, timeout=10):
    return sb.cmd_output(argv, timeout)


def pkg_version(pkg):
    out = cmd_output(["dpkg-query", "-W", "-f=${Version}", pkg])
    return out if out and "no packages found" not in out and "unavailable" not in out else None


def first_line(s):
    return (s or "").strip().splitlines()[0] if (s or "").strip() else "?"


# ---------------------------------------------------------------- statistics

def summarize(values):
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


# ---------------------------------------------------------------- servers

def wait_port(port, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def simple_server(name, argv_fn, workdir, stop_sig=signal.SIGTERM):
    """A factory port -> Server for a program that takes its port on the
    command line (argv_fn(port) -> argv)."""
    def make(port):
        return Server(name, argv_fn(port), stop_sig, workdir=workdir)
    return make


# ---------------------------------------------------------------- the fastest peers

PEER_BIN = BENCH / ".peers"  # built or installed by bench/run.sh


def peer_available(name):
    """Whether bench/run.sh could set this peer up (it says why not)."""
    return {"bun": (PEER_BIN / "node_modules" / ".bin" / "bun").exists(),
            "fasthttp": (PEER_BIN / "fasthttp-peer").exists(),
            "probe": (PEER_BIN / "probe").exists(),
            "h2o": bool(shutil.which("h2o"))}.get(name, True)


def bun_server(script, workdir):
    bun = str(PEER_BIN / "node_modules" / ".bin" / "bun")
    return simple_server("bun", lambda p: [bun, str(PEERS / script), str(p), "127.0.0.1"], workdir)


def fasthttp_server(mode, workdir, procs=1):
    """fasthttp with GOMAXPROCS=procs (1: the per-core races)."""
    def make(port):
        return Server("fasthttp", ["env", f"GOMAXPROCS={procs}", str(PEER_BIN / "fasthttp-peer"),
                                   mode, f"127.0.0.1:{port}"], signal.SIGTERM, workdir=workdir)
    return make


def capture_response(port, path):
    """The exact bytes of one response to GET path (head and body, by
    Content-Length), for the probe to send back."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        c.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = c.recv(65536)
            if not chunk:
                raise BenchError(f"no response to GET {path} on :{port}")
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        m = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
        want = int(m.group(1)) if m else 0
        while len(body) < want:
            chunk = c.recv(65536)
            if not chunk:
                break
            body += chunk
        return head + b"\r\n\r\n" + body[:want]


def probe_server(workdir, reference_make, path):
    """The limit probe answering with the exact bytes reference_make's
    server sends for GET path (captured once, then frozen)."""
    cache = {}

    def make(port):
        if "file" not in cache:
            ref_port = free_port()
            ref = reference_make(ref_port).start(ref_port)
            try:
                resp = capture_response(ref.port, path)
            finally:
                ref.stop()
            f = Path(workdir) / f"probe-response-{len(cache)}-{port}.bin"
            f.write_bytes(resp)
            cache["file"] = f
        return Server("probe", [str(PEER_BIN / "probe"), str(port), str(cache["file"])],
                      signal.SIGTERM, workdir=workdir)
    return make


# ---------------------------------------------------------------- load generators

def run_wrk(prefix, url, duration, threads=1, conns=50, pipeline=0):
    argv = list(prefix) + ["wrk", f"-t{threads}", f"-c{conns}", f"-d{duration}s", "--latency"]
    if pipeline:
        argv += ["-s", str(BENCH / "pipeline.lua")]
    argv.append(url)
    if pipeline:
        argv += ["--", str(pipeline)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60)
    r = sb.parse_wrk(p.stdout)
    failed = sb.wrk_failed(p.returncode, r)
    errors = ", ".join(f"{k} {v}" for k, v in (r["sockerr"] or {}).items() if v)
    return {"value": r["rps"], "failed": failed, "p50": r["p50"], "p99": r["p99"],
            "bps": r["bps"], "errors": errors,
            "raw": (p.stdout + p.stderr)[-2000:] if failed else ""}


def parse_h2load(text):
    """The figures of an h2load run: req/s, request counts, status classes,
    the TLS protocol and the application protocol it negotiated."""
    r = {"rps": None, "succeeded": 0, "failed": None, "errored": None, "timeout": None,
         "2xx": 0, "non2xx": 0, "alpn": None, "tls": None, "cipher": None, "key": None,
         "mean": None}
    m = re.search(r"^finished in [\d.]+\w*, ([\d.]+) req/s", text, re.M)
    if m:
        r["rps"] = float(m.group(1))
    m = re.search(r"^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                  r"(\d+) failed, (\d+) errored, (\d+) timeout", text, re.M)
    if m:
        r["succeeded"], r["failed"], r["errored"], r["timeout"] = map(int, m.groups()[3:])
    m = re.search(r"^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text, re.M)
    if m:
        r["2xx"] = int(m.group(1))
        r["non2xx"] = sum(int(x) for x in m.groups()[1:])
    for key, pat in (("alpn", r"^Application protocol: (\S+)"), ("tls", r"^TLS Protocol: (\S+)"),
                     ("cipher", r"^Cipher: (\S+)"), ("key", r"^Server Temp Key: (.+)$")):
        m = re.search(pat, text, re.M)
        if m:
            r[key] = m.group(1).strip()
    m = re.search(r"^time for request:\s+(\S+)\s+(\S+)\s+(\S+)", text, re.M)
    if m:
        r["mean"] = m.group(3)
    return r


def h2load_failed(returncode, r, alpn="h2"):
    """Why an h2load run (parse_h2load's r) does not count, or ""."""
    why = []
    if returncode != 0:
        why.append(f"h2load exit {returncode}")
    if r["rps"] is None:
        why.append("no req/s in h2load output")
    if not r["succeeded"]:
        why.append("no succeeded requests")
    for k in ("failed", "errored"):
        if r[k]:
            why.append(f"{r[k]} {k}")
    if r["non2xx"]:
        why.append(f"{r['non2xx']} non-2xx responses")
    if r["2xx"] != r["succeeded"]:
        why.append(f"{r['2xx']} 2xx of {r['succeeded']} succeeded")
    if alpn and r["alpn"] != alpn:
        why.append(f"application protocol {r['alpn'] or 'none'}, not {alpn}")
    return "; ".join(why)


def run_h2load(prefix, url, duration, conns=50, streams=10, threads=1):
    """h2load over TLS (ALPN h2), `threads` threads, `-D duration` seconds;
    req/s as h2load gives it (requests done / duration). A run with a failed
    or errored request, a non-2xx status or another protocol than h2 fails."""
    argv = list(prefix) + ["h2load", f"-t{threads}", f"-c{conns}", f"-m{streams}", "-D",
                           str(duration), url]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60)
    r = parse_h2load(p.stdout)
    failed = h2load_failed(p.returncode, r)
    return {"value": r["rps"], "failed": failed, "p50": None, "p99": None,
            "requests": r["succeeded"],
            "mean": r["mean"], "errors": f"{r['timeout']} timeout" if r["timeout"] else "",
            "tls": r["tls"], "cipher": r["cipher"], "key": r["key"], "alpn": r["alpn"],
            "raw": (p.stdout + p.stderr)[-2000:] if failed else ""}


def run_tls_conns(prefix, tool, port, path, duration, resume, conns=50, expect_len=None):
    """bench/lib/tls_conns.c: one TLS 1.3 handshake and one request per
    connection, `conns` at once; value = connections per second."""
    argv = list(prefix) + [str(tool), str(port), path, str(conns), str(duration)]
    if resume:
        argv.append("--resume")
    if expect_len is not None:
        argv += ["--expect-len", str(expect_len)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60)
    m = re.search(r"connections (\d+) resumed (\d+) later (\d+) errors (\d+) seconds ([\d.]+) "
                  r"rate ([\d.]+) cipher (\S+) group (\S+)", p.stdout)
    why = []
    if p.returncode != 0:
        why.append(f"tls_conns exit {p.returncode}: {first_line(p.stderr)}")
    if not m:
        why.append("no summary line from tls_conns")
    elif not int(m.group(1)):
        why.append("no connection completed")
    out = {"value": float(m.group(6)) if m else None, "failed": "; ".join(why), "p50": None,
           "p99": None, "errors": (f"{m.group(4)} failed" if m and int(m.group(4)) else ""),
           "raw": (p.stdout + p.stderr)[-2000:] if why else ""}
    if m:
        out.update(connections=int(m.group(1)), resumed=int(m.group(2)), later=int(m.group(3)),
                   cipher=m.group(7), key=m.group(8))
        if resume:
            log(f"    resumed {out['resumed']:,} of {out['later']:,} connections after each slot's first")
    return out


def run_h2_load(prefix, tool, port, path, duration, conns=50, streams=10, expect_len=None):
    """bench/lib/h2_load.c: `conns` h2 connections over TLS 1.3, `streams`
    GETs of `path` in flight on each; value = requests per second (each
    checked for status 200 and, with expect_len, its body length)."""
    argv = list(prefix) + [str(tool), str(port), path, str(conns), str(streams), str(duration)]
    if expect_len is not None:
        argv += ["--expect-len", str(expect_len)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60)
    m = re.search(r"requests (\d+) errors (\d+) seconds ([\d.]+) rate ([\d.]+) reconnects (\d+) "
                  r"cipher (\S+)", p.stdout)
    why = []
    if p.returncode != 0:
        why.append(f"h2_load exit {p.returncode}: {first_line(p.stderr)}")
    if not m:
        why.append("no summary line from h2_load")
    elif not int(m.group(1)):
        why.append("no request completed")
    out = {"value": float(m.group(4)) if m else None, "failed": "; ".join(why), "p50": None,
           "p99": None, "errors": (f"{m.group(2)} failed" if m and int(m.group(2)) else ""),
           "raw": (p.stdout + p.stderr)[-2000:] if why else ""}
    if m:
        out.update(requests=int(m.group(1)), cipher=m.group(6), tls="TLSv1.3")
    return out


def parse_hey(text):
    r = {"rps": None, "ok": 0, "other": 0, "errors": 0, "p50": None, "p99": None}
    m = re.search(r"Requests/sec:\s+([\d.]+)", text)
    if m:
        r["rps"] = float(m.group(1))
    for code, n in re.findall(r"^\s+\[(\d+)\]\s+(\d+) responses", text, re.M):
        if code == "200":
            r["ok"] += int(n)
        else:
            r["other"] += int(n)
    m = re.search(r"Error distribution:(.*)", text, re.S)
    if m:
        r["errors"] = sum(int(n) for n in re.findall(r"^\s+\[(\d+)\]", m.group(1), re.M))
    for pct, key in (("50", "p50"), ("99", "p99")):
        m = re.search(rf"^\s+{pct}% in ([\d.]+) secs", text, re.M)
        if m:
            r[key] = f"{float(m.group(1)) * 1000:.2f}ms"
    return r


def run_hey(prefix, url, duration, conns=8, keepalive=True):
    argv = list(prefix) + ["hey", "-z", f"{duration}s", "-c", str(conns)]
    if not keepalive:
        argv.append("-disable-keepalive")
    argv.append(url)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60)
    r = parse_hey(p.stdout)
    why = []
    if p.returncode != 0:
        why.append(f"hey exit {p.returncode}")
    if r["rps"] is None or not r["ok"]:
        why.append("no successful requests")
    if r["other"]:
        why.append(f"{r['other']} non-200 responses")
    # hey counts the requests cut short when -z expires as errors: a handful
    # (at most one per worker) is normal.
    if r["errors"] > conns:
        why.append(f"{r['errors']} errors")
    return {"value": r["rps"], "failed": "; ".join(why), "p50": r["p50"], "p99": r["p99"],
            "errors": str(r["errors"]) if r["errors"] else "",
            "raw": (p.stdout + p.stderr)[-2000:] if why else ""}


def parse_httperf(text):
    r = {}
    m = re.search(r"^Total: connections (\d+) requests (\d+) replies (\d+) test-duration ([\d.]+) s",
                  text, re.M)
    if m:
        r["conns"], r["requests"], r["replies"] = map(int, m.groups()[:3])
        r["duration"] = float(m.group(4))
    m = re.search(r"^Reply status: 1xx=(\d+) 2xx=(\d+) 3xx=(\d+) 4xx=(\d+) 5xx=(\d+)", text, re.M)
    if m:
        r["2xx"] = int(m.group(2))
        r["non2xx"] = int(m.group(1)) + sum(int(x) for x in m.groups()[2:])
    m = re.search(r"^Errors: total (\d+) client-timo (\d+)", text, re.M)
    if m:
        r["errors"], r["timeouts"] = int(m.group(1)), int(m.group(2))
    m = re.search(r"^Reply time \[ms\]: response ([\d.]+)", text, re.M)
    if m:
        r["response_ms"] = float(m.group(1))
    return r


def run_httperf(prefix, port, uri, rate, calls, seconds):
    """Offers `rate` new connections a second for `seconds`, each making
    `calls` requests one after the other; response rate = 2xx replies /
    test duration (which stretches when the server falls behind)."""
    nconns = max(1, int(rate * seconds))
    argv = list(prefix) + ["httperf", "--server", "127.0.0.1", "--port", str(port), "--uri", uri,
                           "--rate", str(rate), "--num-conns", str(nconns),
                           "--num-calls", str(calls), "--timeout", "2"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 120)
    r = parse_httperf(p.stdout)
    why = []
    if p.returncode != 0 or "duration" not in r:
        why.append(f"httperf exit {p.returncode}: {first_line(p.stderr)}")
    value = r["2xx"] / r["duration"] if r.get("duration") and "2xx" in r else None
    return {"value": value, "offered": rate * calls, "failed": "; ".join(why),
            "errors": r.get("errors"), "timeouts": r.get("timeouts"),
            "response_ms": r.get("response_ms"), "non2xx": r.get("non2xx")}


def run_redis_benchmark(prefix, port, tests, n, pipeline, clients=50, size=64):
    argv = list(prefix) + ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port),
                           "-c", str(clients), "-P", str(pipeline), "-d", str(size),
                           "-n", str(n), "-t", ",".join(tests), "--csv"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    out = {}
    for line in p.stdout.splitlines():
        cols = [c.strip('"') for c in line.strip().split(",")]
        if len(cols) >= 2 and cols[0] != "test":
            try:
                out[cols[0].upper()] = {"value": float(cols[1]),
                                        "p50": f"{cols[4]}ms" if len(cols) > 4 else None,
                                        "p99": f"{cols[6]}ms" if len(cols) > 6 else None,
                                        "failed": ""}
            except ValueError:
                pass
    results = {}
    for t in tests:
        r = out.get(t.upper())
        if r is None:
            r = {"value": None, "failed": f"redis-benchmark gave no {t.upper()} line (exit "
                                          f"{p.returncode}): {first_line(p.stderr or p.stdout)}"}
        results[t.upper()] = r
    return results


# ---------------------------------------------------------------- race runner

# ------------------------------------------------------------ machine state

NEAR_NS = 250  # cache-line round trip below this: the two CPUs are close
MIXED_RETRIES = 2  # a round whose runs saw the CPUs both near and far is run again
NEAR_WAIT_S = 60   # before a round, wait up to this long for the CPUs to be near...
_near_budget = [300.0]  # ...and at most this long in a whole bench run
_PROBE = {}


def setup_probe(tmp, pins):
    """Builds bench/lib/cpu_rtt.c when the server and the client each have a
    CPU: every run then records how far apart the two CPUs are (the host
    moves the vCPUs of a small VM, and loopback races speed up or slow down
    with it) and how idle the client's CPU was."""
    srv, cli = pins
    if not srv or not cli:
        return
    out = tmp / "cpu_rtt"
    p = subprocess.run(["cc", "-O2", "-pthread", "-o", str(out), str(LIB / "cpu_rtt.c")],
                       capture_output=True, text=True)
    if p.returncode != 0:
        log(f"cpu_rtt probe not built: {p.stderr.strip()[:200]}")
        return
    _PROBE.update(bin=str(out), server_cpu=srv[-1], client_cpu=cli[-1])


def cpu_rtt():
    """Cache-line round trip (ns) between the server's and the client's CPU."""
    if not _PROBE:
        return None
    try:
        p = subprocess.run([_PROBE["bin"], _PROBE["server_cpu"], _PROBE["client_cpu"]],
                           capture_output=True, text=True, timeout=10)
        return int(p.stdout.strip())
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def _cpu_ticks(cpu):
    """(idle ticks, all ticks) of one CPU from /proc/stat."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{cpu} "):
                v = [int(x) for x in line.split()[1:]]
                return v[3] + v[4], sum(v[:8])
    return None


def _measured(run):
    """Runs run() and returns (its result, {cpu_rtt: [before, after], client_idle: %})."""
    before = cpu_rtt()
    t0 = _cpu_ticks(_PROBE["client_cpu"]) if _PROBE else None
    res = run()
    t1 = _cpu_ticks(_PROBE["client_cpu"]) if _PROBE else None
    after = cpu_rtt()
    idle = None
    if t0 and t1 and t1[1] > t0[1]:
        idle = round(100.0 * (t1[0] - t0[0]) / (t1[1] - t0[1]), 1)
    return res, {"cpu_rtt": [before, after], "client_idle": idle}


def fmachine(m):
    rtt = "/".join(str(x) for x in m.get("cpu_rtt", []) if x is not None)
    parts = [f"CPU RTT {rtt} ns"] if rtt else []
    if m.get("client_idle") is not None:
        parts.append(f"client idle {m['client_idle']:g}%")
    return f" ({', '.join(parts)})" if parts else ""


def round_distance(rnd):
    """'near', 'far' or 'mixed': the CPU distance over every run of a round."""
    rtts = [x for r in rnd.values() for x in (r.get("cpu_rtt") or []) if x is not None]
    if not rtts:
        return None
    if all(x < NEAR_NS for x in rtts):
        return "near"
    if all(x >= NEAR_NS for x in rtts):
        return "far"
    return "mixed"


def wait_near(label):
    """With the CPUs far apart the load generator is often the limit for
    both servers (its CPU 0% idle) and the race measures the host; wait a
    while for them to come close, as one waits for a quiet machine. Rounds
    that still run far are labelled so in the report."""
    rtt = cpu_rtt()
    if rtt is None or rtt < NEAR_NS or _near_budget[0] <= 0:
        return
    t0 = time.monotonic()
    limit = min(NEAR_WAIT_S, _near_budget[0])
    while rtt is not None and rtt >= NEAR_NS and time.monotonic() - t0 < limit:
        time.sleep(1)
        rtt = cpu_rtt()
    waited = time.monotonic() - t0
    _near_budget[0] -= waited
    log(f"  {label}: waited {waited:.0f} s for the CPUs to come close: "
        + ("they did" if rtt is not None and rtt < NEAR_NS else "they did not, running far"))


def run_alternating(settings, contenders, cases, run_fn, label):
    """contenders: [(name, server)], the first is brisk, the second its peer,
    any more are reference lines. cases: [case dict] (see new_case).
    run_fn(name, server, duration, warm) -> {case key: result}, one run of every
    case for one contender. Warm-up (settings.warmup s each), then
    settings.rounds rounds of A B [C], each round in that order."""
    log(f"{label}: warm-up {settings.warmup} s each")
    for name, server in contenders:
        run_fn(name, server, settings.warmup, True)
    for i in range(settings.rounds):
        for attempt in range(MIXED_RETRIES + 1):
            wait_near(label)
            got = _one_round(settings, contenders, cases, run_fn, label, i)
            dist = round_distance({n: next(iter(res.values()), {}) for n, res in got.items()})
            if dist != "mixed" or attempt == MIXED_RETRIES:
                break
            log(f"  {label} round {i + 1}: the CPUs moved between the runs (CPU RTT crossed "
                f"{NEAR_NS} ns); running the round again")
        for case in cases:
            case["rounds"].append({name: got[name][case["key"]] for name, _ in contenders
                                   if case["key"] in got[name]})


def _one_round(settings, contenders, cases, run_fn, label, i):
    """One run of every contender: {name: {case key: result}}."""
    got = {}
    for name, server in contenders:
        res, machine = _measured(lambda: run_fn(name, server, settings.duration, False))
        for r in res.values():
            r.update(machine)
        got[name] = res
        states = []
        for case in cases:
            r = res.get(case["key"])
            if r is None:
                continue
            states.append(f"FAILED ({r['failed']})" if r["failed"] else f"{r['value']:,.0f}")
            if r["failed"] and r.get("raw"):
                log("    " + "\n    ".join(r["raw"].splitlines()[-12:]))
        log(f"  {label} round {i + 1}/{settings.rounds} {name}: " + ", ".join(states)
            + fmachine(machine))
    return got


def new_case(key, name, load, contenders, metric="req/s", target=None, headline=False,
             better="higher", ref_targets=None):
    """A race case. contenders: names, brisk first, its peer second, then
    reference lines. target: minimum ratio brisk/peer (or maximum when
    better == "lower"); ref_targets: {reference line: its target}, when the
    case must also beat those (met only when every target is)."""
    return {"key": key, "name": name, "load": load, "metric": metric, "contenders": list(contenders),
            "target": target, "ref_targets": dict(ref_targets or {}), "better": better,
            "headline": headline, "rounds": []}


def finish_case(case):
    """Medians, min-max and pair-by-pair ratios of a case's rounds."""
    names = case["contenders"]
    summ = {}
    for n in names:
        summ[n] = summarize([r[n]["value"] for r in case["rounds"]
                             if n in r and not r[n].get("failed")])
    a = names[0]
    for b in names[1:]:
        ratios = []
        for r in case["rounds"]:
            ra, rb = r.get(a), r.get(b)
            if ra and rb and not ra.get("failed") and not rb.get("failed") and rb["value"]:
                ratios.append(ra["value"] / rb["value"])
        summ[f"ratio:{b}"] = summarize(ratios)
        for dist in ("near", "far"):
            sub = [r[a]["value"] / r[b]["value"] for r in case["rounds"]
                   if round_distance(r) == dist and r.get(a) and r.get(b)
                   and not r[a].get("failed") and not r[b].get("failed") and r[b]["value"]]
            if sub:
                summ[f"ratio_{dist}:{b}"] = summarize(sub)
    case["summary"] = summ
    case["failed_runs"] = sum(1 for r in case["rounds"] for n in names
                              if n in r and r[n].get("failed"))
    ratio = summ.get(f"ratio:{names[1]}") if len(names) > 1 else None
    if case["target"] is not None and ratio:
        def ok(r, target):
            return r["median"] >= target if case["better"] == "higher" else r["median"] <= target
        met = ok(ratio, case["target"])
        for ref, target in (case.get("ref_targets") or {}).items():
            r = summ.get(f"ratio:{ref}")
            met = met and bool(r) and ok(r, target)
        case["met"] = bool(met)
    else:
        case["met"] = None
    return case


# ---------------------------------------------------------------- per-request costs

def client_argv(spec, port, rounds, depth=1, conns=10):
    """spec: {"proto": "http"|"resp", "path": ..., "expect_len": ...}"""
    argv = [sys.executable, str(LIB / "loadclient.py"), spec["proto"], "127.0.0.1", str(port),
            spec.get("path", "-"), str(conns), str(rounds), "--depth", str(depth)]
    if spec.get("expect_len") is not None:
        argv += ["--expect-len", str(spec["expect_len"])]
    return argv


def _h2_client(server, spec, rounds, depth, conns, prefix=()):
    """The counting client over TLS h2: h2load, `conns` connections with
    `depth` streams in flight each, rounds x conns x depth requests; every
    one must succeed with a 2xx over h2."""
    n = rounds * conns * depth
    argv = list(prefix) + ["h2load", "-t1", f"-c{conns}", f"-m{depth}", f"-n{n}",
                           f"https://127.0.0.1:{server.port}{spec['path']}"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    r = parse_h2load(p.stdout)
    why = h2load_failed(p.returncode, r)
    if not why and r["succeeded"] != n:
        why = f"{r['succeeded']} succeeded of {n}"
    if why:
        raise BenchError(f"{server.name}: h2load (counting client) failed: {why}\n"
                         f"{p.stdout[-800:]}{server.log_tail()}")
    return r["succeeded"]


def _client(server, spec, rounds, depth, conns, prefix=()):
    if spec["proto"] == "h2":
        return _h2_client(server, spec, rounds, depth, conns, prefix)
    p = subprocess.run(list(prefix) + client_argv(spec, server.port, rounds, depth, conns),
                       capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise BenchError(f"{server.name}: the counting client failed: {p.stderr.strip()}\n"
                         f"{server.log_tail()}")
    return int(p.stdout.split()[1])


def strace_per_request(make, tmp, spec, settings, depth=1, pin=()):
    """Syscalls per request: the server under `strace -c -f`, the client
    keeping settings.cost_conns connections busy (depth requests in flight on
    each); (calls with R rounds - calls with 1 round) / requests difference.
    Server, strace and client share one CPU (pin) so the client has written
    on every connection before the server runs: the batching is then
    repeatable."""
    conns = settings.cost_conns
    runs = {}
    for tag, rounds in (("base", 1), ("full", settings.cost_rounds)):
        port = free_port()
        out = tmp / f"strace-{tag}-{port}.txt"
        server = make(port)
        server.start(port, prefix=pin, strace_out=out, start_timeout=60)
        try:
            n = _client(server, spec, rounds, depth, conns, prefix=pin)
        finally:
            server.stop(timeout=30)
        if not out.exists():
            raise BenchError(f"strace wrote no summary for {server.name}")
        runs[tag] = (n, sb.parse_strace_c(out))
    (n0, base), (n1, full) = runs["base"], runs["full"]
    nreq = n1 - n0
    per = {k: (full.get(k, 0) - base.get(k, 0)) / nreq for k in set(full) | set(base)}
    total = (sum(full.values()) - sum(base.values())) / nreq
    top = sorted(((v, k) for k, v in per.items() if abs(v) >= 0.005), reverse=True)[:8]
    return {"requests": nreq, "per_req": total, "top": [[k, round(v, 3)] for v, k in top]}


def wait_group_gone(pgid, timeout=30):
    """Waits until no process of the group (a server's session) is left;
    then, or after timeout, kills what remains."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def callgrind_total(outdir):
    total = 0
    files = list(Path(outdir).glob("cg.*"))
    for f in files:
        text = f.read_text(errors="replace")
        m = re.search(r"^totals:\s+(\d+)", text, re.M) or re.search(r"^summary:\s+(\d+)", text, re.M)
        if m:
            total += int(m.group(1))
    return total, len(files)


def callgrind_per_request(make, tmp, spec, settings, pin=(), rounds=None,
                          warm_rounds=None, depth=1):
    """User-space instructions per request: the server under
    `valgrind --tool=callgrind` (all its threads and forked children), both
    runs first take settings.cost_warm_rounds rounds of warm-up, then 1 round
    (baseline) or settings.cost_rounds rounds; the difference in Ir divided
    by the difference in requests."""
    conns = settings.cost_conns
    warm_rounds = warm_rounds or settings.cost_warm_rounds
    runs = {}
    for tag, nrounds in (("base", 1), ("full", rounds or settings.cost_rounds)):
        port = free_port()
        outdir = tmp / f"callgrind-{tag}-{port}"
        outdir.mkdir()
        server = make(port)
        wrap = ["valgrind", "-q", "--tool=callgrind", f"--callgrind-out-file={outdir}/cg.%p"]
        server.start(port, prefix=pin, wrap=wrap, start_timeout=120)
        try:
            _client(server, spec, warm_rounds, depth, conns)
            n = _client(server, spec, nrounds, depth, conns)
        finally:
            rc = server.stop(timeout=60)
            # a forked child that outlives the server (h2o's neverbleed key
            # process) writes its profile when it exits: wait for it
            wait_group_gone(server.proc.pid)
        total, nfiles = callgrind_total(outdir)
        if not nfiles or not total:
            raise BenchError(f"callgrind wrote no totals for {server.name} (exit {rc})\n"
                             f"{server.log_tail()}")
        runs[tag] = (n, total)
    (n0, i0), (n1, i1) = runs["base"], runs["full"]
    return {"requests": n1 - n0, "warmup": warm_rounds * conns * depth,
            "per_req": (i1 - i0) / (n1 - n0)}


def measure_costs(label, make, tmp, spec, settings, what=("strace", "callgrind"),
                  depth=1, cg_rounds=None, cg_warm_rounds=None):
    """Both counts for one server; a failing count is recorded, not fatal."""
    row = {"server": label, "client": f"{settings.cost_conns} connections, all busy, "
                                       f"{depth} in flight each"}
    cpus = sorted(os.sched_getaffinity(0))
    pin = ["taskset", "-c", str(cpus[0])] if shutil.which("taskset") else []
    if "strace" in what:
        log(f"strace: {label} ({settings.cost_conns} connections x {depth} in flight)")
        try:
            row["strace"] = strace_per_request(make, tmp, spec, settings, depth=depth, pin=pin)
            log(f"  {label}: {row['strace']['per_req']:.2f} syscalls/request")
        except Exception as e:  # noqa: BLE001 (recorded in the report)
            row["strace"] = {"error": str(e).splitlines()[0]}
            log(f"  {label}: strace count failed: {e}")
    if "callgrind" in what:
        log(f"callgrind: {label}")
        try:
            row["callgrind"] = callgrind_per_request(make, tmp, spec, settings, pin=pin,
                                                     depth=depth,
                                                     rounds=cg_rounds, warm_rounds=cg_warm_rounds)
            log(f"  {label}: {row['callgrind']['per_req']:,.0f} instructions/request")
        except Exception as e:  # noqa: BLE001 (recorded in the report)
            row["callgrind"] = {"error": str(e).splitlines()[0]}
            log(f"  {label}: callgrind count failed: {e}")
    return row


def quote(argv):
    return shlex.join(str(a) for a in argv)
