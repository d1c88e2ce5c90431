"""Writes the results of bench/run.py: latest.md (a section per race, ratios
first, then absolute figures), latest.json, headline.md (README-ready) and
PNG charts, all in bench/results/."""
import json
import math
from pathlib import Path

import frontpage
from harness import log

COLORS = {"brisk": "#e4572e", "node": "#4b7bb4", "nginx": "#6a9f58", "redis": "#a23b72",
          "fastapi": "#8c6bb1", "h2o": "#2a9d8f", "bun": "#f4a261", "fasthttp": "#264653",
          "probe": "#bbbbbb"}
PEER_LABEL = {"node": "Node.js", "nginx": "nginx", "redis": "Redis", "fastapi": "FastAPI",
              "h2o": "h2o", "bun": "Bun", "fasthttp": "fasthttp", "probe": "limit probe"}
SERVER_LABEL = {"brisk": "brisk-foods", "fastapi": "FastAPI"}  # the rest race's tables


# ---------------------------------------------------------------- formatting

def plural(n, word):
    return f"{n} {word}{'' if n == 1 else 's'}"


def fnum(v, metric=""):
    if v is None:
        return "—"
    if metric == "bytes/key":
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:,.2f}"


def fshort(v):
    if v is None:
        return "—"
    for div, suf in ((1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            x = v / div
            return f"{x:.2f}{suf}" if x < 10 else f"{x:.1f}{suf}" if x < 100 else f"{x:.0f}{suf}"
    return f"{v:.0f}" if abs(v) >= 10 else f"{v:.2f}"


def fspan(s, metric=""):
    if not s:
        return "—"
    if s["n"] == 1:
        return fnum(s["median"], metric)
    return f"{fnum(s['median'], metric)} ({fnum(s['min'], metric)}-{fnum(s['max'], metric)})"


def fratio(s, bold=False):
    if not s:
        return "—"
    med = f"**{s['median']:.2f}x**" if bold else f"{s['median']:.2f}x"
    if s["n"] == 1:
        return f"{med} (1 round)"
    return f"{med} ({s['min']:.2f}-{s['max']:.2f})"


def ftarget(case):
    if case["target"] is None:
        return "—"
    op = ">= " if case["better"] == "higher" else "<= "
    refs = case.get("ref_targets") or {}
    if not refs:
        return op + f"{case['target']:g}x"
    peer = case["contenders"][1]
    return ", ".join(f"{op}{t:g}x {PEER_LABEL.get(n, n)}"
                     for n, t in [(peer, case["target"])] + list(refs.items()))


def fmet(case):
    met = {True: "yes", False: "no", None: "—"}[case["met"]]
    if case.get("failed_runs"):
        met += f" ({case['failed_runs']} failed run{'s' if case['failed_runs'] > 1 else ''})"
    return met


def cost_cell(row, kind):
    c = row.get(kind)
    if not c:
        return "n/a"
    if "error" in c:
        return "failed"
    return f"{c['per_req']:.2f}" if kind == "strace" else f"{c['per_req']:,.0f}"


# ---------------------------------------------------------------- markdown

def charts_method_notes_md(race):
    out = []
    if race["charts"]:
        out += [" ".join(f"![{c}]({c})" for c in race["charts"]), ""]
    if race["method"]:
        out += ["Method:", ""] + [f"- {m}" for m in race["method"]] + [""]
    if race["notes"]:
        out += ["Notes:", ""] + [f"- {m}" for m in race["notes"]] + [""]
    return out


def distance_md(cases, peer):
    """The ratios split by how far apart the two CPUs were (harness.round_distance)."""
    lines = []
    for c in cases:
        parts = []
        for dist in ("near", "far"):
            sm = c["summary"].get(f"ratio_{dist}:{peer}")
            if sm:
                parts.append(f"{dist} {fratio(sm)}" + (f" ({sm['n']} rounds)" if sm["n"] > 1 else ""))
        if parts:
            lines.append(f"| {c['name']} | " + "; ".join(parts) + " |")
    if not lines:
        return []
    return ["", "The same ratios by CPU distance: rounds where every run saw the server's and the "
            "client's CPU close (cache-line round trip < 250 ns) or far apart; the host moves "
            "the vCPUs, and loopback traffic between far CPUs costs both sides more.", "",
            "| case | by distance |", "|---|---|"] + lines


def race_md(race, run):
    out = [f"## {race['key']}", "", f"**{race['title']}**", ""]
    if race["status"] == "pending":
        out += [f"Pending: {race['reason']}.", ""]
        out += [f"- {m}" for m in race["method"]]
        return out + [""]
    if is_rest(race):
        return rest_md(race, run)
    if race["status"] == "failed":
        out += [f"**FAILED**: {race['reason'].splitlines()[0] if race['reason'] else '?'}", ""]
        if len(race["reason"].splitlines()) > 1:
            out += ["```"] + race["reason"].splitlines()[:30] + ["```", ""]
    cases = race["cases"]
    if cases:
        peers = cases[0]["contenders"][1:]
        peer = race["peer"]
        refs = [p for p in peers if p != peer]
        out += [f"Ratios, brisk / {peer} computed round by round: median (min-max)"
                + (f"; reference line: {', '.join(refs)}" if refs else "") + ".", ""]
        head = ["case", "load", f"brisk / {peer}"] + [f"brisk / {r} (reference)" for r in refs] + \
               ["target", "met?"]
        out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for c in cases:
            cells = [c["name"], c["load"], fratio(c["summary"].get(f"ratio:{peer}"), bold=True)]
            cells += [fratio(c["summary"].get(f"ratio:{r}")) for r in refs]
            cells += [ftarget(c), fmet(c)]
            out.append("| " + " | ".join(cells) + " |")
        out += distance_md(cases, peer)
        out += ["", f"Absolute figures: median (min-max) over {plural(run['settings']['rounds'], 'round')}.", ""]
        names = cases[0]["contenders"]
        head = ["case", "unit"] + names
        out += ["| " + " | ".join(head) + " |", "|---|---|" + "--:|" * len(names)]
        for c in cases:
            out.append("| " + " | ".join([c["name"], c["metric"]] +
                                         [fspan(c["summary"].get(n), c["metric"]) for n in names]) + " |")
        out.append("")
    if race.get("sweep"):
        sw = race["sweep"]
        names = list(sw["series"])
        out += [f"httperf sweep: response rate (replies/s, median over rounds) versus offered rate "
                f"(requests/s, {sw['calls']} per connection); errors = most httperf errors at that "
                f"point in any round (client timeouts, fd-unavail).", ""]
        head = ["offered req/s"] + [f"{n} replies/s" for n in names] + [f"{n} errors" for n in names]
        out += ["| " + " | ".join(head) + " |", "|" + "--:|" * len(head)]
        for i, off in enumerate(sw["offered"]):
            cells = [f"{off:,}"] + [fspan(sw["series"][n][i]) for n in names] + \
                    [str(sw["errors"][n][i] if sw["errors"][n][i] is not None else "—") for n in names]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    if race["costs"]:
        out += ["Per-request costs: syscalls per request (`strace -c -f`, the server's whole "
                "process tree) and user-space instructions per request (`valgrind "
                "--tool=callgrind`, Ir of every thread and forked child). Each is the difference "
                "between a run with many requests and a run with 10 (same startup, same "
                "connections, same warm-up), divided by the difference in requests (column "
                "\"counted over\"). The client (bench/lib/loadclient.py) keeps 10 connections busy "
                "at once (it writes on all of them, then reads all replies) and shares the "
                "server's CPU, so the server finds several ready connections per wakeup; "
                "how many varies a little from run to run, so compare at one decimal.", ""]
        out += ["| request | server | syscalls/req | syscalls by name (per request) | "
                "instructions/req | counted over | client |", "|---|---|--:|---|--:|---|---|"]
        for row in race["costs"]:
            st = row.get("strace") or {}
            top = ", ".join(f"{k} {v:.2f}" for k, v in st.get("top", [])) or \
                (st.get("error", "")[:80] if st else "")
            counted = []
            if st.get("requests"):
                counted.append(f"strace {st['requests']:,}")
            cg = row.get("callgrind") or {}
            if cg.get("requests"):
                counted.append(f"callgrind {cg['requests']:,} after {cg.get('warmup', 0):,} warm-up")
            out.append(f"| {row.get('request', '')} | {row['server']} | {cost_cell(row, 'strace')} | "
                       f"{top} | {cost_cell(row, 'callgrind')} | {'; '.join(counted) or '—'} | "
                       f"{row['client']} |")
        errs = [(row["server"], k, row[k]["error"]) for row in race["costs"] for k in ("strace", "callgrind")
                if isinstance(row.get(k), dict) and "error" in row[k]]
        for name, kind, err in errs:
            out.append(f"\n{kind} for {name} failed: {err}")
        out.append("")
    out += charts_method_notes_md(race)
    rows = []
    for c in cases:
        for i, rnd in enumerate(c["rounds"], 1):
            for n in c["contenders"]:
                r = rnd.get(n)
                if not r:
                    continue
                rtt = "/".join(str(x) for x in (r.get("cpu_rtt") or []) if x is not None)
                idle = r.get("client_idle")
                rows.append(f"| {c['name']} | {i} | {n} | {fnum(r.get('value'), c['metric'])} | "
                            f"{r.get('p50') or '—'} | {r.get('p99') or '—'} | {r.get('errors') or '—'} | "
                            f"{rtt or '—'} | {'—' if idle is None else f'{idle:g}%'} | "
                            f"{'FAILED: ' + r['failed'] if r.get('failed') else 'ok'} |")
    if rows:
        out += ["<details><summary>Every round</summary>", "",
                "CPU RTT: cache-line round trip between the server's and the client's CPU before/after "
                "the run (bench/lib/cpu_rtt.c); client idle: idle share of the client's CPU during "
                "the run (near 0%: the load generator was the limit).", "",
                "| case | round | server | value | p50 | p99 | errors | CPU RTT ns | client idle | status |",
                "|---|--:|---|--:|--:|--:|---|--:|--:|---|"] + rows + ["", "</details>", ""]
    return out


# ---------------------------------------------------------------- rest race

PCTS = ("p50", "p95", "p99")


def is_rest(race):
    return race["key"] == "rest" and race.get("databases") is not None


def fms(v):
    if v is None:
        return "—"
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def fspan_ms(s):
    if not s:
        return "—"
    if s["n"] == 1:
        return fms(s["median"])
    return f"{fms(s['median'])} ({fms(s['min'])}-{fms(s['max'])})"


def fbytes(n):
    if n is None:
        return "?"
    for div, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n} B"


def fcount(n):
    return "?" if n is None else f"{n:,}"


def flat_met(case):
    m = case.get("latency_met")
    return {True: "yes", False: "no", None: "—"}[m]


def rest_md(race, run):
    """The rest section: per database, ratios (req/s brisk / FastAPI,
    latency FastAPI / brisk: > 1 is brisk better), then absolute figures."""
    out = [f"## {race['key']}", "", f"**{race['title']}**", ""]
    if race["status"] == "failed":
        out += [f"**FAILED**: {race['reason'].splitlines()[0] if race['reason'] else '?'}", ""]
        if len(race["reason"].splitlines()) > 1:
            out += ["```"] + race["reason"].splitlines()[:30] + ["```", ""]
    nr = run["settings"]["rounds"]
    for db in race["databases"]:
        cases = [c for c in race["cases"] if c.get("db") == db["key"]]
        out += [f"### {race['key']}: {db['name']}", ""]
        if db.get("server"):
            out += [f"Database: {db['server']}.", ""]
        sizes = []
        for n, sz in (db.get("size") or {}).items():
            if "start_bytes" in sz:
                sizes.append(f"{SERVER_LABEL.get(n, n)} {fbytes(sz['start_bytes'])} "
                             f"({fcount(sz.get('start_foods'))} foods) after seeding"
                             + (f", {fbytes(sz['end_bytes'])} ({fcount(sz.get('end_foods'))} foods) "
                                "at the end" if "end_bytes" in sz else ""))
        if sizes:
            out += ["Database sizes (bulk-insert adds 100 foods a request): " + "; ".join(sizes) + ".",
                    ""]
        if db["status"] == "skipped":
            out += [f"Skipped: {db['reason']}.", ""]
            continue
        if db["status"] == "failed":
            out += [f"**FAILED**: {db['reason'].splitlines()[0]}", ""]
        if not cases:
            continue
        out += ["Ratios computed round by round, median (min-max): throughput brisk / FastAPI, "
                "latency FastAPI / brisk; above 1 means brisk is better.", "",
                "| endpoint | req/s: brisk / FastAPI | p50: FastAPI / brisk | p95: FastAPI / brisk | "
                "p99: FastAPI / brisk | req/s target | met? | better at every percentile? |",
                "|---|---|---|---|---|---|---|---|"]
        for c in cases:
            lat = c.get("latency") or {}
            out.append("| " + " | ".join(
                [c["endpoint"], fratio(c["summary"].get("ratio:fastapi"), bold=True)]
                + [fratio((lat.get(p) or {}).get("ratio")) for p in PCTS]
                + [ftarget(c), fmet(c), flat_met(c)]) + " |")
        out += ["", f"Absolute figures, median (min-max) over {plural(nr, 'round')}: requests per "
                "second and latency in milliseconds.", "",
                "| endpoint | request | brisk req/s | FastAPI req/s | brisk p50 | FastAPI p50 | "
                "brisk p95 | FastAPI p95 | brisk p99 | FastAPI p99 |",
                "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
        for c in cases:
            lat = c.get("latency") or {}
            cells = [c["endpoint"], f"`{c.get('request', '')}`",
                     fspan(c["summary"].get("brisk")), fspan(c["summary"].get("fastapi"))]
            for p in PCTS:
                cells += [fspan_ms((lat.get(p) or {}).get(n)) for n in ("brisk", "fastapi")]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    out += charts_method_notes_md(race)
    rows = []
    for c in race["cases"]:
        for i, rnd in enumerate(c["rounds"], 1):
            for n in c["contenders"]:
                r = rnd.get(n)
                if not r:
                    continue
                rows.append(f"| {c['name']} | {i} | {n} | {fnum(r.get('value'))} | "
                            f"{fcount(r.get('requests'))} | "
                            + " | ".join(fms(r.get(f"{p}_ms")) for p in PCTS) + " | "
                            f"{fms(r.get('max_ms'))} | {r.get('errors') or '—'} | "
                            f"{'FAILED: ' + r['failed'] if r.get('failed') else 'ok'} |")
    if rows:
        out += ["<details><summary>Every round</summary>", "",
                "| case | round | server | req/s | requests | p50 ms | p95 ms | p99 ms | max ms | "
                "socket errors | status |",
                "|---|--:|---|--:|--:|--:|--:|--:|--:|---|---|"] + rows + ["", "</details>", ""]
    return out


def rest_headline_rows(race):
    out = []
    for db in race["databases"]:
        cases = [c for c in race["cases"] if c.get("db") == db["key"]]
        if db["status"] == "skipped":
            out.append(f"| rest | {db['name']} | skipped | | {db['reason'].split(':')[0]} |")
        elif db["status"] == "failed" and not cases:
            out.append(f"| rest | {db['name']} | failed | | see latest.md |")
        out += [rest_headline_row(c) for c in cases]
    return out


def rest_headline_row(c):
    sb_, sp = c["summary"].get("brisk"), c["summary"].get("fastapi")
    p99 = (c.get("latency") or {}).get("p99") or {}
    b99, f99 = p99.get("brisk"), p99.get("fastapi")
    b = (f"{fshort(sb_['median'])} req/s" if sb_ else "—") + \
        (f", p99 {fms(b99['median'])} ms" if b99 else "")
    p = "FastAPI " + (f"{fshort(sp['median'])} req/s" if sp else "—") + \
        (f", p99 {fms(f99['median'])} ms" if f99 else "")
    ratio = fratio(c["summary"].get("ratio:fastapi"), bold=True).replace(" (1 round)", "")
    r99 = p99.get("ratio")
    if r99:
        ratio += f"; p99 {r99['median']:.2f}x"
    return f"| rest | {c['name']} | {b} | {p} | {ratio} |"


def rest_chart(race, outdir, plt, mode):
    """rest.png: per database (rows) and endpoint (columns), the p50, p95
    and p99 latency of brisk and FastAPI (bars: medians, whiskers min-max)."""
    dbs = [db for db in race["databases"] if any(c.get("db") == db["key"] and c.get("latency")
                                                for c in race["cases"])]
    if not dbs:
        return None
    endpoints = []
    for c in race["cases"]:
        if c["endpoint"] not in endpoints:
            endpoints.append(c["endpoint"])
    names = ("brisk", "fastapi")
    labels = {"brisk": "brisk-foods", "fastapi": "FastAPI"}
    fig, axes = plt.subplots(len(dbs), len(endpoints), figsize=(3.6 * len(endpoints), 3.6 * len(dbs)),
                             squeeze=False)
    for row, db in zip(axes, dbs):
        for ax, ep in zip(row, endpoints):
            c = next((c for c in race["cases"] if c.get("db") == db["key"] and c["endpoint"] == ep),
                     None)
            if c is None or not c.get("latency"):
                ax.set_visible(False)
                continue
            lat = c["latency"]
            top = 0
            for j, n in enumerate(names):
                xs = [i + (j - 0.5) * 0.38 for i in range(len(PCTS))]
                s_ = [lat[p].get(n) for p in PCTS]
                med = [s["median"] if s else 0 for s in s_]
                lo = [s["median"] - s["min"] if s else 0 for s in s_]
                hi = [s["max"] - s["median"] if s else 0 for s in s_]
                whiskers = {"yerr": [lo, hi], "capsize": 3} if any(lo + hi) else {}
                bars = ax.bar(xs, med, width=0.36, **whiskers, label=labels[n],
                              color=COLORS.get(n, "#888"), edgecolor="black", linewidth=0.5)
                for b, v, h in zip(bars, med, hi):
                    if v:
                        ax.annotate(fms(v), (b.get_x() + b.get_width() / 2, v + h), ha="center",
                                    va="bottom", fontsize=7, xytext=(0, 1), textcoords="offset points")
                top = max([top] + [m + h for m, h in zip(med, hi)])
            ticks = []
            for p in PCTS:
                r = lat[p].get("ratio")
                ticks.append(f"{p}\n{r['median']:.1f}x" if r else p)
            ax.set_xticks(range(len(PCTS)), ticks, fontsize=8)
            ax.set_ylim(0, top * 1.18 or 1)
            ax.set_ylabel("latency, ms (lower is better)", fontsize=8)
            ax.tick_params(axis="y", labelsize=8)
            ax.grid(axis="y", alpha=0.3)
            sb_, sp = c["summary"].get("brisk"), c["summary"].get("fastapi")
            rr = c["summary"].get("ratio:fastapi")
            sub = (f"req/s {fshort(sb_['median']) if sb_ else '—'} vs "
                   f"{fshort(sp['median']) if sp else '—'}" + (f" ({rr['median']:.1f}x)" if rr else ""))
            ax.set_title(f"{db['name']}: {ep}\n{sub}", fontsize=9)
            ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"rest: brisk-foods vs FastAPI, latency percentiles at 50 connections ({mode}); "
                 "under each percentile: FastAPI / brisk", fontsize=10)
    fig.tight_layout()
    name = f"{race['key']}.png"
    fig.savefig(outdir / name, dpi=110)
    plt.close(fig)
    return name


def latest_md(run):
    s = run["settings"]
    out = ["# brisk benchmarks", "",
           f"Written by `bench/run.sh{' --quick' if s['quick'] else ''}` "
           f"(`make bench{'-quick' if s['quick'] else ''}`) on {run['date']}, in {run['elapsed_s']:.0f} s.",
           ""]
    if run.get("rerun"):
        rr = run["rerun"]
        out += [f"Races {', '.join(rr['races'])} were run again on {rr['date']} "
                "(`bench/run.py --races ...`) and merged into this report.", ""]
    if s["quick"]:
        out += [f"**Quick mode**: {plural(s['rounds'], 'round')} per race, {s['duration']} s per run: "
                "indicative only; `make bench` runs 3 rounds of 5 s.", ""]
    else:
        out += [f"Full mode: {s['rounds']} rounds per race (A B A B ...), {s['duration']} s per run, "
                f"after a {s['warmup']} s warm-up of each server.", ""]
    out += ["| race | status | headline |", "|---|---|---|"]
    for race in run["races"]:
        hls = []
        for c in race["cases"]:
            if c["headline"]:
                r = c["summary"].get(f"ratio:{race['peer']}")
                if r:
                    hls.append(f"{c['name']} {r['median']:.2f}x")
        hl = (f"brisk / {PEER_LABEL.get(race['peer'], race['peer'])}: " + "; ".join(hls)) if hls else ""
        status = race["status"] + (f" ({race['reason'].splitlines()[0]})" if race["status"] == "pending" else "")
        out.append(f"| [{race['key']}](#{race['key']}) | {status} | {hl} |")
    out += ["", "## Machine and versions", "", "| what | value |", "|---|---|"]
    for k, v in run["machine"].items():
        out.append(f"| {k} | {v} |")
    for k, v in run["versions"].items():
        out.append(f"| {k} | {v} |")
    out += ["", "Method: every per-core race pins the server(s) to one CPU and the load generator "
            "to the other (taskset); each server gets a warm-up, then the servers of a race take "
            "turns (A B A B ...) for the rounds; figures are medians with min-max, and each ratio "
            "is computed within a round (brisk's run over its peer's run in the same round) "
            "before taking the median. The host moves this VM's two vCPUs: sometimes they are "
            "close (a cache line bounces between them in ~90 ns), sometimes far (~500 ns), and "
            "loopback traffic between far CPUs costs both sides so much that the load generator "
            "often becomes the limit for both servers. bench/lib/cpu_rtt.c measures it around "
            "every run; before each round the harness waits up to 60 s (5 minutes per bench run "
            "in all) for the CPUs to be close, a round whose runs saw both is run again (twice at "
            "most), and each race gives its ratios of near and far rounds apart.", ""]
    for race in run["races"]:
        out += race_md(race, run)
    if run.get("cost_chart"):
        out += ["## Per-request costs, all races", "",
                "The syscall and instruction counts of the hello, static and kv sections side by "
                "side (instructions on a log scale).", "", f"![costs]({run['cost_chart']})", ""]
    return "\n".join(out) + "\n"


def headline_md(run):
    s = run["settings"]
    m = run["machine"]
    out = ["<!-- Generated by bench/run.py into bench/results/headline.md; paste into README.md. -->",
           "",
           f"Measured side by side by `make bench{'-quick' if s['quick'] else ''}` on {m['cpu']}, "
           f"{m['cores']} cores, Linux {m['kernel']}, {run['date'][:10]}"
           + (f" (quick mode: {plural(s['rounds'], 'round')}, indicative)" if s["quick"] else
              f" ({s['rounds']} rounds, medians)") +
           (f"; {', '.join(run['rerun']['races'])} rerun {run['rerun']['date'][:16]}"
            if run.get("rerun") else "") +
           ". Ratios are brisk / peer, median (min-max) of round-by-round ratios. "
           "Full tables: [bench/results/latest.md](bench/results/latest.md).", "",
           "| race | case | brisk | peer | brisk / peer |", "|---|---|--:|--:|--:|"]
    for race in run["races"]:
        peer = race["peer"]
        plabel = PEER_LABEL.get(peer, peer)
        if race["status"] == "pending":
            out.append(f"| {race['key']} | vs {plabel} | pending | | {race['reason'].split(';')[0]} |")
            continue
        if race["status"] == "failed" and not race["cases"]:
            out.append(f"| {race['key']} | vs {plabel} | failed | | see latest.md |")
            continue
        if is_rest(race):
            out += rest_headline_rows(race)
            continue
        for c in race["cases"]:
            if not c["headline"]:
                continue
            unit = {"req/s": " req/s", "ops/s": " ops/s", "replies/s": " replies/s",
                    "entries/s": " entries/s", "conn/s": " conn/s", "µs/conn": " µs/conn", "µs/req": " µs/req", "bytes/key": " B/key", "s": " s",
                    "MiB": " MiB"}.get(c["metric"], "")
            sb_, sp = c["summary"].get("brisk"), c["summary"].get(peer)
            b = (fshort(sb_["median"]) if c["metric"] != "bytes/key" else f"{sb_['median']:.0f}") + unit \
                if sb_ else "—"
            p = (fshort(sp["median"]) if c["metric"] != "bytes/key" else f"{sp['median']:.0f}") + unit \
                if sp else "—"
            ratio = fratio(c["summary"].get(f"ratio:{peer}"), bold=True).replace(" (1 round)", "")
            out.append(f"| {race['key']} | {c['name']} | {b} | {plabel} {p} | {ratio} |")
            # the other contenders of the case (the fastest peers, the limit probe)
            for other in c["contenders"][1:]:
                so = c["summary"].get(other)
                if other == peer or not so:
                    continue
                po = (fshort(so["median"]) if c["metric"] != "bytes/key" else f"{so['median']:.0f}") + unit
                ro = fratio(c["summary"].get(f"ratio:{other}"), bold=True).replace(" (1 round)", "")
                out.append(f"| | | | {PEER_LABEL.get(other, other)} {po} | {ro} |")
    cost_rows = [(race, row) for race in run["races"] for row in race["costs"]]
    if cost_rows:
        out += ["", "Per request (10 connections, all busy): syscalls from `strace -c -f`, "
                "user-space instructions from callgrind.", "",
                "| race | request | brisk syscalls | peer syscalls | brisk instructions | peer instructions |",
                "|---|---|--:|--:|--:|--:|"]
        by = {}
        for race, row in cost_rows:
            by.setdefault((race["key"], race["peer"], row.get("request", "")), {})[row["server"]] = row
        for (key, peer, req), rows in by.items():
            b, p = rows.get("brisk", {}), rows.get(peer, {})
            plabel = PEER_LABEL.get(peer, peer)

            def ins(r):
                c = cost_cell(r, "callgrind") if r else "n/a"
                return c
            if ins(b) == "n/a" and ins(p) == "n/a":
                bi = pi = "—"
            else:
                bi, pi = ins(b), f"{plabel} {ins(p)}"
            out.append(f"| {key} | {req} | {cost_cell(b, 'strace') if b else '—'} | "
                       f"{plabel} {cost_cell(p, 'strace') if p else '—'} | {bi} | {pi} |")
    charts = [c for race in run["races"] for c in race["charts"]] + \
        ([run["cost_chart"]] if run.get("cost_chart") else [])
    if charts:
        out += ["", "Charts: " + " · ".join(f"[{c.rsplit('.', 1)[0]}](bench/results/{c})" for c in charts)]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- charts

def charts(run, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        log("matplotlib is not available: no charts (bench/run.sh installs it into bench/.venv)")
        return []
    written = []
    fmt = FuncFormatter(lambda v, _: fshort(v) if v else "0")
    r = run["settings"]["rounds"]
    mode = (f"quick mode, {r} round{'s' if r > 1 else ''}" if run["settings"]["quick"] else
            f"{r} rounds") + (", medians, whiskers min-max" if r > 1 else "")
    for race in run["races"]:
        if is_rest(race):
            name = rest_chart(race, outdir, plt, mode)
            if name:
                race["charts"].append(name)
                written.append(name)
            continue
        cases = [c for c in race["cases"] if any(c["summary"].get(n) for n in c["contenders"])]
        if not cases:
            continue
        ncols = min(4, len(cases))
        nrows = math.ceil(len(cases) / ncols)
        fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 3.3 * nrows), squeeze=False)
        for ax in axes.flat[len(cases):]:
            ax.set_visible(False)
        for ax, c in zip(axes.flat, cases):
            names = c["contenders"]
            med = [c["summary"][n]["median"] if c["summary"].get(n) else 0 for n in names]
            lo = [med[i] - c["summary"][n]["min"] if c["summary"].get(n) else 0 for i, n in enumerate(names)]
            hi = [c["summary"][n]["max"] - med[i] if c["summary"].get(n) else 0 for i, n in enumerate(names)]
            bars = ax.bar(range(len(names)), med, yerr=[lo, hi], capsize=5,
                          color=[COLORS.get(n, "#888") for n in names], edgecolor="black", linewidth=0.5)
            for b, v, h in zip(bars, med, hi):  # above the whisker, clear of it
                ax.annotate(fshort(v) if c["metric"] != "bytes/key" else f"{v:.0f}",
                            (b.get_x() + b.get_width() / 2, v + h), ha="center", va="bottom",
                            fontsize=8, xytext=(0, 2), textcoords="offset points")
            ax.set_xticks(range(len(names)), names)
            ax.yaxis.set_major_formatter(fmt)
            ax.set_ylabel(c["metric"] + (" (lower is better)" if c["better"] == "lower" else ""),
                          fontsize=8)
            ax.set_ylim(0, max(m + h for m, h in zip(med, hi)) * 1.18 or 1)
            r = c["summary"].get(f"ratio:{race['peer']}")
            title = c["name"] if len(c["name"]) <= 34 else c["name"][:33] + "…"
            ax.set_title(title + (f"\nbrisk = {r['median']:.2f}x {race['peer']}" if r else ""),
                         fontsize=9)
            ax.tick_params(labelsize=8)
            ax.grid(axis="y", alpha=0.3)
        fig.suptitle(f"{race['key']}: {race['title']} ({mode})", fontsize=10)
        # room for the title above the first row of panels, however many rows
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / fig.get_figheight()))
        name = f"{race['key']}.png"
        fig.savefig(outdir / name, dpi=110)
        plt.close(fig)
        race["charts"].append(name)
        written.append(name)
        if race.get("sweep"):
            sw = race["sweep"]
            fig, ax = plt.subplots(figsize=(7, 4.5))
            x = sw["offered"]
            top = 0
            # references first, brisk last: on top where the lines overlap
            for n, series in reversed(list(sw["series"].items())):
                ys = [p["median"] if p else float("nan") for p in series]
                lo = [p["min"] if p else float("nan") for p in series]
                hi = [p["max"] if p else float("nan") for p in series]
                top = max([top] + [h for h in hi if h == h])
                ax.plot(x, ys, marker="o", color=COLORS.get(n, "#888"), label=n,
                        linestyle="--" if n == "nginx" else "-")
                ax.fill_between(x, lo, hi, color=COLORS.get(n, "#888"), alpha=0.15)
            ax.plot([0, max(x)], [0, max(x)], color="gray", linewidth=0.8, linestyle=":",
                    label="response = offered")
            ax.set_xlabel(f"offered rate (requests/s, {sw['calls']} per connection)")
            ax.set_ylabel("response rate (replies/s)")
            ax.xaxis.set_major_formatter(fmt)
            ax.yaxis.set_major_formatter(fmt)
            ax.set_xlim(0, max(x) * 1.02)
            ax.set_ylim(0, max(top, max(x)) * 1.05)
            ax.grid(alpha=0.3)
            handles, labels = ax.get_legend_handles_labels()
            order = sorted(range(len(labels)), key=lambda i: list(sw["series"]).index(labels[i])
                           if labels[i] in sw["series"] else 99)
            ax.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=8)
            ax.set_title(f"echo: httperf response rate vs offered rate ({mode})", fontsize=10)
            fig.tight_layout()
            name = f"{race['key']}-sweep.png"
            fig.savefig(outdir / name, dpi=110)
            plt.close(fig)
            race["charts"].append(name)
            written.append(name)
    # per-request costs, brisk vs peer, every race that has them
    rows = []
    for race in run["races"]:
        by = {}
        for row in race["costs"]:
            by.setdefault(row.get("short") or row.get("request", ""), {})[row["server"]] = row
        for short, d in by.items():
            rows.append((f"{race['key']}\n{short}", race["peer"], d))
    if rows:
        from matplotlib.ticker import NullFormatter
        fig, axes = plt.subplots(2, 1, figsize=(max(6.5, 1.5 * len(rows)), 7.5))
        for ax, kind, label in ((axes[0], "strace", "syscalls per request"),
                                (axes[1], "callgrind", "user-space instructions per request (log scale)")):
            xs = [r for r in rows if any(isinstance(v.get(kind), dict) and "per_req" in v[kind]
                                         for v in r[2].values())]
            for i, (lab, peer, d) in enumerate(xs):
                for j, who in enumerate(("brisk", peer)):
                    c = d.get(who, {}).get(kind) if d.get(who) else None
                    v = c.get("per_req") if isinstance(c, dict) else None
                    if v is None:
                        continue
                    b = ax.bar(i + (j - 0.5) * 0.38, v, width=0.36, color=COLORS.get(who, "#888"),
                               edgecolor="black", linewidth=0.5, label=who)
                    ax.annotate(f"{v:.2f}" if kind == "strace" else fshort(v),
                                (b[0].get_x() + b[0].get_width() / 2, v), ha="center", va="bottom",
                                fontsize=8, xytext=(0, 2), textcoords="offset points")
            ax.set_xticks(range(len(xs)), [x[0] for x in xs], fontsize=8)
            ax.set_xlim(-0.6, max(len(xs), 2) - 0.4)
            ax.set_title(label, fontsize=10)
            if kind == "callgrind":
                ax.set_yscale("log")
                ax.yaxis.set_minor_formatter(NullFormatter())
                vals = [p.get_height() for p in ax.patches if p.get_height() > 0]
                if vals:
                    ax.set_ylim(10 ** math.floor(math.log10(min(vals)) - 0.3), max(vals) * 3)
            else:
                ax.set_ylim(0, ax.get_ylim()[1] * 1.12)
            ax.yaxis.set_major_formatter(fmt)
            ax.grid(axis="y", alpha=0.3)
            handles, labels = ax.get_legend_handles_labels()
            uniq = dict(zip(labels, handles))
            ax.legend(uniq.values(), uniq.keys(), fontsize=8, ncol=len(uniq), loc="upper right")
        fig.suptitle("per-request costs, brisk vs its peer (lower is better; 10 connections, all busy)",
                     fontsize=10)
        fig.tight_layout()
        fig.savefig(outdir / "costs.png", dpi=110)
        plt.close(fig)
        written.append("costs.png")
        run["cost_chart"] = "costs.png"
    return written


def write_all(run, outdir):
    outdir.mkdir(parents=True, exist_ok=True)
    for old in outdir.glob("*.png"):  # every chart here is ours: drop stale ones
        old.unlink()
    written = charts(run, outdir)
    (outdir / "latest.md").write_text(latest_md(run))
    (outdir / "latest.json").write_text(json.dumps(run, indent=1, default=str) + "\n")
    (outdir / "headline.md").write_text(headline_md(run))
    if outdir.resolve() == (Path(__file__).resolve().parents[1] / "results"):
        frontpage.update(outdir)  # the front page make run serves shows the latest run
    return ["latest.md", "latest.json", "headline.md"] + written
