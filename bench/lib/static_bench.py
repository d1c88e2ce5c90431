#!/usr/bin/env python3
"""brisk vs nginx on static files. Run it through bench/static.sh, which
installs what is missing and builds brisk first; see bench/README.md.

Environment knobs:
  DURATION=5     seconds per wrk round
  ROUNDS=3       rounds per race (each round: brisk, then nginx)
  QUICK=1        DURATION=2 ROUNDS=1
  OUT=path       where the markdown goes (default bench/results/static.md)
  KEEP_TMP=1     keep the temp dir (configs, logs, strace output)
  BENCH_BIN_DIR  where brisk is (default build/bin)
  BRISK_CMD=...  (testing) replace the brisk command line: either "nginx" for
                 a second nginx, or a command with {root} and {port}
                 placeholders; its results go to bench/results/static-standin.md
"""
import datetime
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
BIN_DIR = Path(os.environ.get("BENCH_BIN_DIR") or REPO / "build" / "bin")

QUICK = os.environ.get("QUICK") == "1"
DURATION = int(os.environ.get("DURATION", "2" if QUICK else "5"))
ROUNDS = int(os.environ.get("ROUNDS", "1" if QUICK else "3"))
WARMUP = 1
CONNS = 50
DEPTH = 16
BRISK_CMD = os.environ.get("BRISK_CMD", "").strip()
KEEP_TMP = os.environ.get("KEEP_TMP") == "1"
DEFAULT_OUT = "static-standin.md" if BRISK_CMD else "static.md"
OUT = Path(os.environ.get("OUT", BENCH / "results" / DEFAULT_OUT))

SMALL = "index.html"
BIG = "1m.bin"
SMALL_SIZE = 117
BIG_SIZE = 1 << 20

# (file, pipelined?, target ratio brisk/nginx)
RACES = [
    (SMALL, False, 1.5),
    (SMALL, True, 10.0),
    (BIG, False, 1.0),
    (BIG, True, 1.0),
]
# Syscall count: (file, connections, requests per connection, target per request)
STRACE_RUNS = [
    (SMALL, 10, 2000, 3.0),
    (BIG, 10, 50, None),
]

PROCS = []  # every Server started, for cleanup


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


class BenchError(Exception):
    pass


# ---------------------------------------------------------------- helpers

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_pins():
    """(server prefix, client prefix): taskset onto two different CPUs when
    at least two are available, else nothing."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= 2 and shutil.which("taskset"):
        return ["taskset", "-c", str(cpus[0])], ["taskset", "-c", str(cpus[1])]
    return [], []


def cmd_output(argv, timeout=10):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return (p.stdout + p.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unavailable ({e.__class__.__name__})"


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def make_docroot(root):
    root.mkdir(mode=0o755)
    body = ("<!doctype html>\n<html><head><title>brisk</title></head>"
            "<body><p>Hello from the brisk benchmark.</p></body></html>\n")
    body = body.replace("</p>", " " * (SMALL_SIZE - len(body)) + "</p>", 1)
    assert len(body.encode()) == SMALL_SIZE, len(body.encode())
    (root / SMALL).write_bytes(body.encode())
    (root / BIG).write_bytes(os.urandom(BIG_SIZE))
    for f in (SMALL, BIG):
        os.chmod(root / f, 0o644)


# ---------------------------------------------------------------- servers

class Server:
    """One server process, started in its own session so that it and its
    children can be stopped together."""

    def __init__(self, name, argv, stop_sig, pidfile=None, workdir=None):
        self.name, self.argv, self.stop_sig = name, argv, stop_sig
        self.pidfile, self.workdir = pidfile, workdir
        self.proc = None
        self.port = None
        self.traced = False

    def start(self, port, prefix=(), strace_out=None, wrap=(), env=None, start_timeout=15):
        """Starts the server and waits until it accepts connections.
        prefix: argv prefix (taskset), put before strace too; strace_out: run
        under `strace -c -f`, writing its summary there;
        wrap: an argv prefix that execs the server in place (valgrind), so
        the process is still the server; env: extra environment variables."""
        self.port = port
        argv = list(self.argv)
        if strace_out:
            argv = list(prefix) + ["strace", "-c", "-f", "-o", str(strace_out)] + argv
            self.traced = True
        else:
            argv = list(prefix) + list(wrap) + argv
        logf = open(self.workdir / f"{self.name}-{port}.log", "wb")
        self.logpath = logf.name
        self.proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True,
                                     env=dict(os.environ, **env) if env else None)
        logf.close()
        PROCS.append(self)
        deadline = time.monotonic() + start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"{self.name} exited with {self.proc.returncode} on start:\n"
                                 f"  {shlex.join(argv)}\n{self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        raise BenchError(f"{self.name} did not listen on 127.0.0.1:{port} within {start_timeout} s\n"
                         f"  {shlex.join(argv)}\n{self.log_tail()}")

    def log_tail(self, n=20):
        out = []
        for path in [self.logpath] + ([self.workdir / "error.log"] if self.pidfile else []):
            try:
                lines = Path(path).read_text(errors="replace").splitlines()[-n:]
                out += [f"  | {l}" for l in lines]
            except OSError:
                pass
        return "\n".join(out)

    def server_pid(self):
        """The server's own (master) pid: under strace it is strace's child."""
        if not self.traced:
            return self.proc.pid
        if self.pidfile:
            try:
                return int(Path(self.pidfile).read_text().strip())
            except (OSError, ValueError):
                pass
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    stat = (d / "stat").read_text()
                    ppid = int(stat.rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):
                    continue
                if ppid == self.proc.pid:
                    return int(d.name)
        return None

    def stop(self, timeout=15):
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        pid = self.server_pid()
        try:
            if pid:
                os.kill(pid, self.stop_sig)
            self.proc.wait(timeout=timeout)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            log(f"{self.name} did not stop on {signal.Signals(self.stop_sig).name}; killing it")
            self.kill()
        return self.proc.returncode

    def kill(self):
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def nginx_server(name, tmp, root):
    """An nginx built from bench/peers/nginx-static.conf.in. Returns a
    factory: port -> Server (the config is rendered per port)."""
    template = (BENCH / "peers" / "nginx-static.conf.in").read_text()

    def make(port):
        prefix = tmp / f"{name}-{port}"
        prefix.mkdir()
        # As root, nginx workers would switch to "nobody"; stay root so that
        # they read the same files brisk reads (the temp dir is 0700).
        user = "user root;" if os.geteuid() == 0 else ""
        conf = (template.replace("@USER_DIRECTIVE@", user)
                .replace("@PREFIX@", str(prefix))
                .replace("@PORT@", str(port))
                .replace("@ROOT@", str(root)))
        conf_path = prefix / "nginx.conf"
        conf_path.write_text(conf)
        argv = [NGINX, "-e", str(prefix / "error.log"), "-p", str(prefix), "-c", str(conf_path)]
        return Server(name, argv, signal.SIGQUIT, pidfile=prefix / "nginx.pid", workdir=prefix)
    return make


H2O = shutil.which("h2o") or "/usr/bin/h2o"


def h2o_server(name, tmp, root):
    """h2o (Debian's package) serving root with one thread, access log off:
    the fastest static peer beside nginx. Returns a factory port -> Server."""
    def make(port):
        prefix = tmp / f"{name}-{port}"
        prefix.mkdir()
        user = "user: root\n" if os.geteuid() == 0 else ""
        conf = (f"{user}num-threads: 1\n"
                f"pid-file: {prefix}/h2o.pid\n"
                f"error-log: {prefix}/error.log\n"
                f"listen:\n  host: 127.0.0.1\n  port: {port}\n"
                "hosts:\n  default:\n    paths:\n      /:\n"
                f"        file.dir: {root}\n")
        conf_path = prefix / "h2o.conf"
        conf_path.write_text(conf)
        return Server(name, [H2O, "-c", str(conf_path)], signal.SIGTERM, workdir=prefix)
    return make


def brisk_server(tmp, root):
    if BRISK_CMD == "nginx":
        return nginx_server("brisk", tmp, root)

    def make(port):
        if BRISK_CMD:
            argv = [a.replace("{root}", str(root)).replace("{port}", str(port))
                    for a in shlex.split(BRISK_CMD)]
        else:
            argv = [str(BIN_DIR / "brisk"), "--root", str(root),
                    "--listen", f"127.0.0.1:{port}", "--workers", "1", "--access-log", "off"]
        return Server("brisk", argv, signal.SIGTERM, workdir=tmp)
    return make


def verify(server, root, tmp):
    """curl each file once: 200, right Content-Length, same bytes."""
    for f in (SMALL, BIG):
        url = f"http://127.0.0.1:{server.port}/{f}"
        hdr, body = tmp / "verify.hdr", tmp / "verify.body"
        p = subprocess.run(["curl", "-sS", "--max-time", "10", "-D", str(hdr), "-o", str(body), url],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise BenchError(f"{server.name}: curl {url} failed: {p.stderr.strip()}")
        lines = hdr.read_bytes().decode("latin-1").split("\r\n")
        status = lines[0]
        clen = [l.split(":", 1)[1].strip() for l in lines if l.lower().startswith("content-length:")]
        want = (root / f).stat().st_size
        problems = []
        if not re.match(r"HTTP/1\.1 200\b", status):
            problems.append(f"status line {status!r}")
        if clen != [str(want)]:
            problems.append(f"Content-Length {clen or 'missing'}, want {want}")
        if body.read_bytes() != (root / f).read_bytes():
            problems.append(f"body differs ({body.stat().st_size} bytes)")
        if problems:
            raise BenchError(f"{server.name} serves /{f} wrong: " + "; ".join(problems))
    log(f"{server.name} on :{server.port} answers 200 with the right bytes")


# ---------------------------------------------------------------- wrk

UNITS = {"": 1, "B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}


def wrk_failed(returncode, r):
    """Why a wrk run (parse_wrk's r) does not count, or ""."""
    why = []
    if returncode != 0:
        why.append(f"wrk exit {returncode}")
    if r["rps"] is None:
        why.append("no Requests/sec in wrk output")
    if not r["requests"]:
        why.append("no completed requests")
    if r["non2xx"]:
        why.append(f"{r['non2xx']} non-2xx/3xx responses")
    return "; ".join(why)


def parse_wrk(text):
    r = {"rps": None, "bps": None, "non2xx": 0, "sockerr": None, "p50": None, "p99": None,
         "requests": None}
    m = re.search(r"^Requests/sec:\s+([\d.]+)", text, re.M)
    if m:
        r["rps"] = float(m.group(1))
    m = re.search(r"^Transfer/sec:\s+([\d.]+)([KMGT]?B)", text, re.M)
    if m:
        r["bps"] = float(m.group(1)) * UNITS[m.group(2)]
    m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    if m:
        r["non2xx"] = int(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m:
        r["sockerr"] = dict(zip(("connect", "read", "write", "timeout"), map(int, m.groups())))
    for pct, key in (("50", "p50"), ("99", "p99")):
        m = re.search(rf"^\s+{pct}(?:\.000)?%\s+(\S+)", text, re.M)
        if m:
            r[key] = m.group(1)
    m = re.search(r"^\s+(\d+) requests in", text, re.M)
    if m:
        r["requests"] = int(m.group(1))
    return r


def run_wrk(client_prefix, port, path, pipelined, duration):
    argv = list(client_prefix) + ["wrk", "-t1", f"-c{CONNS}", f"-d{duration}s", "--latency"]
    if pipelined:
        argv += ["-s", str(BENCH / "pipeline.lua")]
    argv.append(f"http://127.0.0.1:{port}/{path}")
    if pipelined:
        argv += ["--", str(DEPTH)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60)
    r = parse_wrk(p.stdout)
    r["raw"] = p.stdout + p.stderr
    r["failed"] = wrk_failed(p.returncode, r)
    r["errors"] = ", ".join(f"{k} {v}" for k, v in (r["sockerr"] or {}).items() if v)
    return r


def race_label(f, pipelined):
    size = f"{SMALL_SIZE} B" if f == SMALL else "1 MiB"
    return f"{size} `{f}`, " + (f"pipelined {DEPTH}" if pipelined else "keep-alive")


def run_races(servers, client_prefix):
    results = []
    for f, pipelined, target in RACES:
        label = race_label(f, pipelined)
        log(f"race: {label}: warm-up {WARMUP} s each")
        for s in servers.values():
            run_wrk(client_prefix, s.port, f, pipelined, WARMUP)
        rounds = []
        for i in range(ROUNDS):
            rnd = {}
            for name in ("brisk", "nginx"):
                r = run_wrk(client_prefix, servers[name].port, f, pipelined, DURATION)
                rnd[name] = r
                state = f"FAILED ({r['failed']})" if r["failed"] else f"{r['rps']:.0f} req/s"
                log(f"  round {i + 1}/{ROUNDS} {name}: {state}"
                    + (f" [socket errors: {r['errors']}]" if r["errors"] else ""))
                if r["failed"]:
                    log("  wrk said:\n" + "\n".join("    " + l for l in r["raw"].splitlines()))
            rounds.append(rnd)
        results.append({"label": label, "file": f, "pipelined": pipelined,
                        "target": target, "rounds": rounds})
    return results


# ---------------------------------------------------------------- strace

def parse_strace_c(path):
    """{syscall: calls} from an `strace -c` summary."""
    calls = {}
    for line in Path(path).read_text().splitlines():
        parts = line.split()
        if len(parts) < 5 or not parts[0][0].isdigit() or parts[-1] == "total":
            continue
        try:
            calls[parts[-1]] = calls.get(parts[-1], 0) + int(parts[3])
        except ValueError:
            continue
    return calls


def strace_once(make, tmp, root, f, conns, per_conn, tag):
    port = free_port()
    out = tmp / f"strace-{tag}-{port}.txt"
    server = make(port).start(port, strace_out=out)
    try:
        p = subprocess.run([sys.executable, str(BENCH / "lib" / "kaclient.py"), "127.0.0.1",
                            str(port), f"/{f}", str(conns), str(per_conn),
                            str((root / f).stat().st_size)],
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise BenchError(f"{server.name} under strace: keep-alive client failed: "
                             f"{p.stderr.strip()}\n{server.log_tail()}")
        nreq = int(p.stdout.split()[1])
    finally:
        server.stop()
    if not out.exists():
        raise BenchError(f"strace wrote no summary for {server.name}")
    return nreq, parse_strace_c(out)


def run_strace(makers, tmp, root):
    rows = []
    for f, conns, per_conn, target in STRACE_RUNS:
        for name in ("brisk", "nginx"):
            log(f"strace: {name} /{f}: {conns} keep-alive connections x {per_conn} requests, "
                f"minus a baseline of {conns} x 1")
            n0, base = strace_once(makers[name], tmp, root, f, conns, 1, f"{name}-base")
            n1, full = strace_once(makers[name], tmp, root, f, conns, per_conn, f"{name}-full")
            nreq = n1 - n0
            per = {k: (full.get(k, 0) - base.get(k, 0)) / nreq for k in set(full) | set(base)}
            total = (sum(full.values()) - sum(base.values())) / nreq
            top = sorted(((v, k) for k, v in per.items() if abs(v) >= 0.005), reverse=True)
            rows.append({"file": f, "server": name, "requests": nreq, "per_req": total,
                         "top": [(k, v) for v, k in top[:8]],
                         "target": target if name == "brisk" else None})
            log(f"  {name}: {total:.2f} syscalls/request")
    return rows


# ---------------------------------------------------------------- report

def fmt_rps(v):
    return f"{v:,.0f}" if v is not None else "—"


def fmt_bps(v):
    if v is None:
        return "—"
    for unit in ("GB", "MB", "KB"):
        if v >= UNITS[unit]:
            return f"{v / UNITS[unit]:.2f} {unit[0]}iB/s"
    return f"{v:.0f} B/s"


def report(header, races, syscalls):
    out = [f"# brisk vs nginx, static files", ""]
    out += [f"- {k}: {v}" for k, v in header]
    out += ["", "## Throughput", "",
            "| race | brisk req/s (median) | nginx req/s (median) | ratio median (min-max) | target | met? |",
            "|---|--:|--:|---|---|---|"]
    all_ok = True
    for race in races:
        ok_b = [r["brisk"]["rps"] for r in race["rounds"] if not r["brisk"]["failed"]]
        ok_n = [r["nginx"]["rps"] for r in race["rounds"] if not r["nginx"]["failed"]]
        ratios = [r["brisk"]["rps"] / r["nginx"]["rps"] for r in race["rounds"]
                  if not r["brisk"]["failed"] and not r["nginx"]["failed"] and r["nginx"]["rps"]]
        failed = sum(bool(r[s]["failed"]) for r in race["rounds"] for s in ("brisk", "nginx"))
        if ratios:
            med = statistics.median(ratios)
            ratio = f"{med:.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
            met = "yes" if med >= race["target"] else "no"
        else:
            ratio, met = "—", "no"
        if failed:
            met += f" ({failed} failed run{'s' if failed > 1 else ''})"
            all_ok = False
        out.append(f"| {race['label']} | {fmt_rps(statistics.median(ok_b) if ok_b else None)} "
                   f"| {fmt_rps(statistics.median(ok_n) if ok_n else None)} | {ratio} "
                   f"| >= {race['target']:g}x | {met} |")
    out += ["", "## Syscalls per keep-alive request", "",
            f"`strace -c -f` over the server's whole life: (run with N requests) minus "
            f"(run with 1 request per connection), divided by the difference in requests. "
            f"One request in flight at a time, round-robin over the connections "
            f"(bench/lib/kaclient.py), so expect one epoll_wait per request. Judged at two decimals: "
            f"timer wakeups add a few calls per second of run time.", "",
            "| request | server | requests | syscalls/req | per request, by syscall | target | met? |",
            "|---|---|--:|--:|---|---|---|"]
    for row in syscalls:
        top = ", ".join(f"{k} {v:.2f}" for k, v in row["top"])
        target = f"<= {row['target']:g}" if row["target"] is not None else "—"
        # Judged at the two decimals shown: timer wakeups add a few calls per
        # second of run time whatever the request count (e.g. 3.004 -> 3.00).
        met = ("yes" if round(row["per_req"], 2) <= row["target"] else "no") if row["target"] is not None else "—"
        out.append(f"| `/{row['file']}` | {row['server']} | {row['requests']:,} | "
                   f"{row['per_req']:.2f} | {top} | {target} | {met} |")
    out += ["", "## Rounds", "",
            "| race | round | server | req/s | transfer/s | p50 | p99 | socket errors | status |",
            "|---|--:|---|--:|--:|--:|--:|---|---|"]
    for race in races:
        for i, rnd in enumerate(race["rounds"], 1):
            for s in ("brisk", "nginx"):
                r = rnd[s]
                out.append(f"| {race['label']} | {i} | {s} | {fmt_rps(r['rps'])} | {fmt_bps(r['bps'])} "
                           f"| {r['p50'] or '—'} | {r['p99'] or '—'} | {r['errors'] or '—'} "
                           f"| {'FAILED: ' + r['failed'] if r['failed'] else 'ok'} |")
    out += ["", "wrk's latency figures are not meaningful with pipelining (it times batches; "
            "a p99 of 0 is wrk's own artefact)."]
    return "\n".join(out) + "\n", all_ok


# ---------------------------------------------------------------- main

def on_signal(sig, _frame):
    raise SystemExit(128 + sig)


def main():
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    server_prefix, client_prefix = cpu_pins()
    tmp = Path(tempfile.mkdtemp(prefix="brisk-bench."))
    try:
        root = tmp / "www"
        make_docroot(root)
        makers = {"brisk": brisk_server(tmp, root), "nginx": nginx_server("nginx", tmp, root)}

        if BRISK_CMD == "nginx":
            brisk_version = "stand-in: a second nginx (BRISK_CMD=nginx)"
        else:
            brisk_argv = makers["brisk"](0).argv
            brisk_version = cmd_output([brisk_argv[0], "--version"]).splitlines()[0:1] or ["?"]
            brisk_version = brisk_version[0] + (f" (stand-in: BRISK_CMD={BRISK_CMD})" if BRISK_CMD else "")
        header = [
            ("date", datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %z")),
            ("cpu", f"{cpu_model()}, nproc {len(os.sched_getaffinity(0))}"),
            ("kernel", os.uname().release),
            ("nginx", cmd_output([NGINX, "-v"])),
            ("wrk", cmd_output(["wrk", "-v"]).splitlines()[0].split(" Copyright")[0]),
            ("brisk", brisk_version),
            ("load", f"`wrk -t1 -c{CONNS} -d{DURATION}s --latency`, {ROUNDS} round(s) alternating "
                     f"brisk then nginx after a {WARMUP} s warm-up each; pipelined = "
                     f"bench/pipeline.lua, depth {DEPTH}"),
            ("pinning", f"server `{shlex.join(server_prefix)}`, wrk `{shlex.join(client_prefix)}`"
             if server_prefix else "none (fewer than 2 CPUs)"),
        ]

        servers = {}
        for name in ("brisk", "nginx"):
            port = free_port()
            servers[name] = makers[name](port).start(port, prefix=server_prefix)
            log(f"{name}: {shlex.join(servers[name].argv)}")
            verify(servers[name], root, tmp)
        races = run_races(servers, client_prefix)
        for s in servers.values():
            s.stop()

        syscalls = run_strace(makers, tmp, root)

        text, ok = report(header, races, syscalls)
        print(text)
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(text)
        log(f"wrote {OUT}")
        return 0 if ok else 1
    except BenchError as e:
        print(f"\n[bench] FAILED: {e}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, SystemExit):
        log("interrupted: stopping the servers")
        raise
    finally:
        for s in PROCS:
            s.stop(timeout=5)  # graceful first; kills the group if it hangs
            s.kill()
        if KEEP_TMP:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
