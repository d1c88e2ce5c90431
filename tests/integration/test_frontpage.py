"""The front page `make run` serves (www/), loaded in headless Chromium
(Debian's chromium): it renders, Chromium fetches every image on it with
200, and every link on it resolves (200; the status page is there because
conf/brisk.conf turns it on, as make run uses it)."""
from __future__ import annotations

import http.client
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlparse

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.images = [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag == "img" and a.get("src"):
            self.images.append(a["src"])
        if tag == "link" and a.get("href"):
            self.links.append(a["href"])


def fetch(host, port, path):
    c = http.client.HTTPConnection(host, port, timeout=10)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.getheader("Content-Type", ""), r.read()
    finally:
        c.close()


@pytest.mark.timeout(120)
def test_front_page_in_chromium(start_brisk, tmp_path):
    if not CHROMIUM:
        pytest.skip("chromium is not installed (scripts/deps.sh test installs it)")
    log = tmp_path / "access.log"
    srv = start_brisk(
        config=f"[server]\nlisten = 127.0.0.1:{{port}}\nroot = {REPO / 'www'}\nworkers = 1\n"
               f"cgi = /cgi-bin/ {REPO / 'www' / 'cgi-bin'}\nstatus = /brisk-status\n"
               f"access_log = {log}\n",
        cli_defaults=False)
    base = f"http://{srv.host}:{srv.port}/"
    profile = tmp_path / "chromium-profile"
    p = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                        "--no-first-run", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={profile}", "--window-size=1280,4000",
                        "--virtual-time-budget=5000", "--dump-dom", base],
                       capture_output=True, text=True, timeout=90)
    dom = p.stdout
    assert "<h1>brisk</h1>" in dom, (p.returncode, p.stderr[-2000:])
    refs = Refs()
    refs.feed(dom)
    assert refs.images, "the front page shows the benchmark charts"
    assert any("brisk-status" in h for h in refs.links)
    assert any("cgi-bin" in h for h in refs.links)
    # Chromium itself fetched every image (the access log says so) ...
    srv.stop()
    lines = log.read_text().splitlines()
    for src in refs.images:
        path = urlparse(urljoin(base, src)).path
        assert any(f'"GET {path} HTTP/1.1" 200 ' in ln for ln in lines), (src, lines[-20:])
    # ... and every image is a PNG, every link resolves.
    srv2 = start_brisk(
        config=f"[server]\nlisten = 127.0.0.1:{{port}}\nroot = {REPO / 'www'}\nworkers = 1\n"
               f"cgi = /cgi-bin/ {REPO / 'www' / 'cgi-bin'}\nstatus = /brisk-status\n"
               "access_log = off\n",
        cli_defaults=False)
    base2 = f"http://{srv2.host}:{srv2.port}/"
    for src in refs.images:
        status, ctype, body = fetch(srv2.host, srv2.port, urlparse(urljoin(base2, src)).path)
        assert status == 200 and ctype == "image/png" and body.startswith(b"\x89PNG"), src
    for href in refs.links:
        u = urlparse(urljoin(base2, href))
        assert u.netloc == f"{srv2.host}:{srv2.port}", f"external link {href}"
        target = u.path + (f"?{u.query}" if u.query else "")
        status, _, body = fetch(srv2.host, srv2.port, target)
        assert status == 200 and body, (href, status)
