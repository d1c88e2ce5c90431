"""Privilege drop: started as root with `user = NAME`, brisk serves as NAME."""
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from brisk_testlib import free_port, populate_www

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges")


def proc_uids(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return [int(x) for x in line.split()[1:]]
    raise AssertionError("no Uid line")


@pytest.fixture
def world_readable_root():
    # pytest's tmp dirs are 0700 (root only): the dropped user could not read them.
    d = Path(tempfile.mkdtemp(prefix="brisk-priv-"))
    os.chmod(d, 0o755)
    populate_www(d / "www")
    for p in [d / "www", *(d / "www").rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    yield d / "www"
    shutil.rmtree(d, ignore_errors=True)


def test_runs_as_configured_user(start_brisk, world_readable_root):
    srv = start_brisk(config="[server]\nuser = nobody\nlisten = 127.0.0.1:{port}\n"
                             "root = {root}\nworkers = 1\naccess_log = off\n",
                      root=world_readable_root)
    status, _, body = srv.get("/hello.txt")
    assert status == 200
    nobody = 65534
    assert proc_uids(srv.proc.pid) == [nobody] * 4  # real, effective, saved, fs
    assert "running as user nobody" in srv.stderr()


def test_unknown_user_refuses_to_start(run_brisk, tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    cfg = tmp_path / "brisk.conf"
    cfg.write_text(f"[server]\nuser = no-such-user-xyz\nlisten = 127.0.0.1:{free_port()}\n"
                   f"root = {root}\n")
    r = run_brisk(["-c", str(cfg)])
    assert r.returncode != 0
    assert "no-such-user-xyz" in r.stderr
