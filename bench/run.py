#!/usr/bin/env python3
"""`make bench` / `make bench-quick`: reruns brisk's six races side by side
and writes bench/results/latest.md, latest.json, headline.md and PNG charts.
Run it through bench/run.sh, which installs the peers and tools first.

Usage: bench/run.py [--quick] [--races hello,static,echo,kv,rest,https]
                    [--rounds N] [--duration S] [--no-costs] [--keep-tmp]
Exit code: 0 when every race ran or is pending, 1 when one failed, 130 on
Ctrl-C. Every server it starts is stopped on the way out, whatever happens.
"""
import argparse
import datetime
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "lib"))
import harness  # noqa: E402
from harness import BIN, Settings, cmd_output, first_line, log, pkg_version, sb  # noqa: E402
import races  # noqa: E402
import report  # noqa: E402

RESULTS = harness.BENCH / "results"


def machine():
    mem = "?"
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / (1 << 20):.1f} GiB"
    except OSError:
        pass
    return {"cpu": sb.cpu_model(), "cores": len(os.sched_getaffinity(0)),
            "kernel": os.uname().release, "memory": mem,
            "load average at start": " ".join(open("/proc/loadavg").read().split()[:3]),
            "os": (first_line(cmd_output(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]))),
            "pinning": ("server on CPU %s, load generator on CPU %s (per-core races)" %
                        tuple(sorted(os.sched_getaffinity(0))[:2])
                        if len(os.sched_getaffinity(0)) >= 2 else "none (one CPU)")}


def versions():
    v = {}
    for b in ("brisk", "brisk-hello", "brisk-echo", "brisk-kv", "brisk-foods"):
        p = BIN / b
        v[b] = first_line(cmd_output([str(p), "--version"])) if p.exists() else "not built"
    def tool(name, argv, pkg):
        if not shutil.which(argv[0]):
            v[name] = "not installed"
            return
        out = first_line(cmd_output(argv)) if argv[1:] else ""
        deb = pkg_version(pkg) if pkg else None
        v[name] = "; ".join(x for x in (out, f"Debian package {pkg} {deb}" if deb else "") if x)
    tool("nginx", ["nginx", "-v"], "nginx-light")
    tool("h2o", ["h2o", "--version"], "h2o")
    peers = harness.PEER_BIN
    v["bun"] = (first_line(cmd_output([str(peers / "node_modules" / ".bin" / "bun"), "--version"]))
                if (peers / "node_modules" / ".bin" / "bun").exists() else "not installed")
    gomod = harness.PEERS / "fasthttp" / "go.mod"
    v["fasthttp"] = next((ln.split()[-1] for ln in gomod.read_text().splitlines()
                          if "valyala/fasthttp" in ln), "?") if (peers / "fasthttp-peer").exists() \
        else "not built"
    tool("node", ["node", "--version"], "nodejs")
    tool("redis-server", ["redis-server", "--version"], "redis-server")
    tool("redis-benchmark", ["redis-benchmark", "--version"], "redis-tools")
    tool("wrk", ["wrk"], "wrk")
    tool("h2load", ["h2load", "--version"], "nghttp2-client")
    tool("openssl", ["openssl", "version"], "openssl")
    tool("hey", ["hey"], "hey")
    tool("httperf", ["httperf", "--version"], "httperf")
    tool("strace", ["strace", "-V"], "strace")
    tool("valgrind", ["valgrind", "--version"], "valgrind")
    v["python"] = sys.version.split()[0]
    try:
        import matplotlib
        v["matplotlib"] = matplotlib.__version__
    except ImportError:
        v["matplotlib"] = "not installed (no charts)"
    return v


def on_signal(sig, _frame):
    raise SystemExit(128 + sig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 round of 2 s per race (< 5 min)")
    ap.add_argument("--races", default=",".join(races.RACES),
                    help="comma-separated subset of " + ",".join(races.RACES))
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--duration", type=int, help="seconds per load run")
    ap.add_argument("--no-costs", action="store_true", help="skip the strace/callgrind counts")
    ap.add_argument("--keep-tmp", action="store_true", help="keep configs, logs and traces")
    ap.add_argument("--out", default=str(RESULTS), help="results directory")
    ap.add_argument("--from-json", metavar="FILE",
                    help="measure nothing: rewrite the report and charts from a latest.json")
    a = ap.parse_args()
    if a.from_json:
        import json
        run = json.loads(Path(a.from_json).read_text())
        for race in run["races"]:
            race["charts"] = []
        files = report.write_all(run, Path(a.out))
        log(f"wrote {', '.join(files)} in {a.out}")
        return 0
    wanted = [r.strip() for r in a.races.split(",") if r.strip()]
    for r in wanted:
        if r not in races.RACES:
            ap.error(f"unknown race {r!r}")

    # Ctrl-C raises KeyboardInterrupt even when started with SIGINT ignored
    # (a background job); SIGTERM and SIGHUP unwind the same way.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    settings = Settings(a.quick, a.rounds, a.duration)
    t0 = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="brisk-bench."))
    os.chmod(tmp, 0o755)
    pins = harness.cpu_pins()
    nice = os.environ.get("BENCH_NICE")
    if nice:
        # On a shared machine: the servers and load generators of the races
        # run at this niceness (e.g. -10), so that other work on the same
        # CPUs takes less of their time; both sides of a race alike.
        pins = tuple(["nice", "-n", nice] + list(p) for p in pins)
    ctx = {"settings": settings, "tmp": tmp, "pins": pins, "costs": not a.no_costs}
    harness.setup_probe(tmp, ctx["pins"])
    run = {"date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %z"),
           "settings": {"quick": settings.quick, "rounds": settings.rounds,
                        "duration": settings.duration, "warmup": settings.warmup,
                        "races": wanted, "costs": not a.no_costs, "nice": nice or None},
           "machine": machine(), "versions": versions(), "races": []}
    log(f"{'quick' if a.quick else 'full'} run: {settings.rounds} round(s) of {settings.duration} s; "
        f"races {', '.join(wanted)}; temp dir {tmp}")
    try:
        for key in wanted:
            t = time.monotonic()
            log(f"===== race {key}")
            race = races.RACES[key](ctx)
            race["elapsed_s"] = round(time.monotonic() - t, 1)
            log(f"===== race {key}: {race['status']}"
                + (f" ({race['reason'].splitlines()[0]})" if race["reason"] else "")
                + f" in {race['elapsed_s']:.0f} s")
            run["races"].append(race)
        run["elapsed_s"] = time.monotonic() - t0
        run["machine"]["load average at end"] = " ".join(open("/proc/loadavg").read().split()[:3])
        out = Path(a.out)
        files = report.write_all(run, out)
        log(f"wrote {', '.join(str(out / f) for f in files)}")
        print((out / "headline.md").read_text())
        failed = [r["key"] for r in run["races"] if r["status"] == "failed"]
        if failed:
            log(f"FAILED races: {', '.join(failed)} (see {out / 'latest.md'})")
        log(f"done in {time.monotonic() - t0:.0f} s")
        return 1 if failed else 0
    except (KeyboardInterrupt, SystemExit):
        log("interrupted: stopping every server started")
        raise
    finally:
        races.stop_all()
        if a.keep_tmp:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
