"""Puts the latest benchmark results on the front page that `make run` serves:
copies the charts and latest.md from bench/results/ into www/bench/ and
rewrites the part of www/index.html between <!-- bench:begin --> and
<!-- bench:end --> from headline.md (its tables as HTML, its chart links
pointing at the copies). bench/run.py calls it after every run; by hand:

    python3 bench/lib/frontpage.py [RESULTS_DIR] [WWW_DIR]
"""
from __future__ import annotations

import html
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def inline(md: str) -> str:
    """The inline Markdown headline.md uses: **bold**, `code`, [text](link)."""
    out = html.escape(md, quote=False)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    out = re.sub(r"`(.+?)`", r"<code>\1</code>", out)

    def link(m):
        target = m.group(2).replace("bench/results/", "bench/")
        return f'<a href="{html.escape(target)}">{m.group(1)}</a>'
    return re.sub(r"\[([^\]]+)\]\(([^)]+)\)", link, out)


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def md_to_html(md: str) -> str:
    out, table, lines = [], [], md.splitlines()

    def flush_table():
        if not table:
            return
        head, rows = table[0], table[2:]
        aligns = ["right" if c.endswith(":") else "left" for c in cells(table[1])]
        out.append("<table>")
        out.append("<tr>" + "".join(f"<th>{inline(c)}</th>" for c in cells(head)) + "</tr>")
        for r in rows:
            out.append("<tr>" + "".join(
                f'<td class="{a}">{inline(c)}</td>' for c, a in zip(cells(r), aligns)) + "</tr>")
        out.append("</table>")
        table.clear()

    for line in lines:
        if line.startswith("<!--"):
            continue
        if line.startswith("|"):
            table.append(line)
            continue
        flush_table()
        if line.strip():
            out.append(f"<p>{inline(line)}</p>")
    flush_table()
    return "\n".join(out)


def charts_html(results: Path) -> str:
    pngs = sorted(p.name for p in results.glob("*.png"))
    return "\n".join(f'<figure><img src="bench/{n}" alt="{n[:-4]} race chart">'
                     f"<figcaption>{n[:-4]}</figcaption></figure>" for n in pngs)


def update(results: Path = ROOT / "bench" / "results", www: Path = ROOT / "www") -> None:
    head = results / "headline.md"
    if not head.exists():
        return
    dest = www / "bench"
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*.png"):
        old.unlink()
    for p in list(results.glob("*.png")) + [results / "latest.md"]:
        if p.exists():
            shutil.copyfile(p, dest / p.name)
    section = (f"{BEGIN}\n{md_to_html(head.read_text())}\n"
               f'<div class="charts">\n{charts_html(results)}\n</div>\n{END}')
    index = www / "index.html"
    page = index.read_text()
    if BEGIN in page and END in page:
        page = page[:page.index(BEGIN)] + section + page[page.index(END) + len(END):]
        index.write_text(page)


if __name__ == "__main__":
    update(*(Path(a) for a in sys.argv[1:3]))
