"""Replication and RDB faults: a replica's link cut in the middle of its
RDB, a master killed mid-transfer, a corrupt RDB (on disk and from a
master), a disk full during BGSAVE. Each must leave a clear log line, no
crash, and no partial file or dataset in the place of a good one."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time

import pytest
import redis

from test_kv_replication import (REDIS_SERVER, info, populate, real,  # noqa: F401
                                 replicate, snapshot, wait_for, wait_link_up,
                                 wait_same_offset, assert_same_data)

pytestmark = pytest.mark.skipif(not REDIS_SERVER, reason="redis-server is not installed")


def children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def local_data(c):
    c.set("mine", "old")
    c.rpush("mylist", *range(50))


def assert_local_data(c):
    assert c.get("mine") == b"old"
    assert c.llen("mylist") == 50


def wait_transfer_started(rc, minimum=1):
    wait_for(lambda: info(rc).get("master_sync_in_progress") == 1 and
             int(info(rc).get("master_sync_read_bytes", 0)) >= minimum, 20, "transfer started")


@pytest.mark.timeout(90)
def test_replica_link_cut_mid_rdb_keeps_dataset(kv_factory, real):
    """A real master streams a slow diskless RDB; its replica link is
    killed half way. The brisk-kv replica keeps its dataset, logs the cut,
    and syncs fully on the next attempt."""
    m = real("--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0")
    mc = m.client()
    populate(mc, 4000)
    mc.config_set("rdb-key-save-delay", 1000)  # ~4 s for the RDB
    r = kv_factory()
    rc = r.client()
    local_data(rc)
    replicate(rc, m.port)
    wait_transfer_started(rc, 100)
    mc.execute_command("CLIENT", "KILL", "TYPE", "replica")
    wait_for(lambda: "connection lost after" in r.output(), 20, "the cut logged")
    assert_local_data(rc)  # the partial RDB replaced nothing
    assert rc.ping()
    mc.config_set("rdb-key-save-delay", 0)
    wait_link_up(rc)
    mc.set("final", 1)
    wait_same_offset(mc, rc)
    assert_same_data(mc, rc)
    assert rc.get("mine") is None  # the full sync replaced the dataset, at once


@pytest.mark.timeout(90)
def test_brisk_master_rdb_child_killed(kv_factory):
    """brisk-kv master: its full-sync child dies; the replica is dropped
    with a log line, the master keeps serving, the next sync succeeds."""
    m = kv_factory("--repl-diskless-sync-delay", "0", "--rdb-key-save-delay", "200")
    mc = m.client()
    populate(mc, 5000)
    r = kv_factory()
    rc = r.client()
    local_data(rc)
    replicate(rc, m.port)
    wait_for(lambda: children(m.proc.pid), 10, "the sync child")
    for pid in children(m.proc.pid):
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: "Full sync to replica" in m.output() and "failed" in m.output(), 10,
             "failure logged")
    assert mc.ping() and mc.dbsize() > 0
    assert_local_data(rc)
    mc.config_set("rdb-key-save-delay", 0)
    wait_link_up(rc)
    wait_same_offset(mc, rc)
    assert_same_data(mc, rc)


@pytest.mark.timeout(90)
def test_master_killed_mid_transfer(kv_factory, real):
    """The master dies (SIGKILL) in the middle of the RDB: the replica
    keeps its data, logs it, keeps retrying, and serves reads."""
    m = real("--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0")
    mc = m.client()
    populate(mc, 4000)
    mc.config_set("rdb-key-save-delay", 1000)
    r = kv_factory()
    rc = r.client()
    local_data(rc)
    replicate(rc, m.port)
    wait_transfer_started(rc, 100)
    m.stop(signal.SIGKILL)
    wait_for(lambda: "connection lost after" in r.output(), 20, "the loss logged")
    time.sleep(1.5)  # a few reconnection attempts to a dead port
    assert_local_data(rc)
    ri = info(rc)
    assert ri["master_link_status"] == "down" and ri["master_sync_in_progress"] == 0
    assert rc.execute_command("ROLE")[3] in (b"connect", b"connecting")
    r.stop()
    assert r.proc.returncode == 0, r.output()[-2000:]


def _read_command(f) -> list[bytes] | None:
    """One RESP array of bulk strings from a socket file, or None at EOF."""
    line = f.readline()
    if not line:
        return None
    n = int(line[1:].strip())
    out = []
    for _ in range(n):
        size = int(f.readline()[1:].strip())
        out.append(f.read(size + 2)[:-2])
    return out


def _fake_master(rdb: bytes, ready: threading.Event, stop: threading.Event, port_box: list):
    """Answers a replica's handshake and sends rdb as its full sync."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(0.2)
    port_box.append(srv.getsockname()[1])
    ready.set()
    while not stop.is_set():
        try:
            conn, _ = srv.accept()
        except socket.timeout:
            continue
        conn.settimeout(5)
        try:
            f = conn.makefile("rb")
            while True:
                cmd = _read_command(f)
                if cmd is None:
                    break
                name = cmd[0].upper()
                if name == b"PING":
                    conn.sendall(b"+PONG\r\n")
                elif name == b"PSYNC":
                    conn.sendall(b"+FULLRESYNC " + b"a" * 40 + b" 0\r\n")
                    conn.sendall(b"$%d\r\n" % len(rdb) + rdb)
                    time.sleep(0.3)
                    break
                else:
                    conn.sendall(b"+OK\r\n")
        except (OSError, ValueError):
            pass
        finally:
            conn.close()
    srv.close()


@pytest.mark.timeout(60)
def test_corrupt_rdb_from_master_keeps_dataset(kv_factory, tmp_path):
    """A master that sends an RDB with a wrong CRC64: refused before the
    dataset is emptied, logged, retried; the replica stays alive."""
    src = kv_factory("--save", "", workdir=tmp_path / "src")
    c = src.client()
    c.set("from-master", "x")
    c.execute_command("SAVE")
    rdb = bytearray((src.dir / "dump.rdb").read_bytes())
    rdb[12] ^= 0xFF  # a byte of the body: the CRC no longer matches
    ready, stop, box = threading.Event(), threading.Event(), []
    t = threading.Thread(target=_fake_master, args=(bytes(rdb), ready, stop, box), daemon=True)
    t.start()
    ready.wait(5)
    r = kv_factory()
    rc = r.client()
    local_data(rc)
    try:
        replicate(rc, box[0])
        wait_for(lambda: "the RDB from the master is corrupt" in r.output(), 20, "refusal logged")
        assert_local_data(rc)
        assert rc.get("from-master") is None
        assert rc.ping()
    finally:
        stop.set()
        t.join(5)
    rc.execute_command("REPLICAOF", "NO", "ONE")
    assert_local_data(rc)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("damage", ["crc", "truncated"])
def test_corrupt_dump_at_startup(kv_factory, damage):
    """A damaged dump.rdb at start-up: the server refuses to start with a
    clear log line and leaves the file as it was."""
    s = kv_factory("--save", "3600 1")
    c = s.client()
    populate(c, 500)
    c.execute_command("SAVE")
    assert s.stop() == 0
    path = s.dir / "dump.rdb"
    data = bytearray(path.read_bytes())
    if damage == "crc":
        data[-3] ^= 0xFF
        want = "RDB CRC error"
    else:
        data = data[: len(data) // 2]
        want = "truncated or corrupt"
    path.write_bytes(bytes(data))
    s.start(wait=False)
    assert s.proc.wait(10) != 0
    assert want in s.output()
    assert path.read_bytes() == bytes(data)  # not replaced, not removed


@pytest.mark.timeout(60)
def test_disk_full_during_bgsave(kv_factory):
    """A file size limit (prlimit RLIMIT_FSIZE, like a full disk) makes
    BGSAVE and SAVE fail with a log line; dump.rdb keeps the last good
    snapshot, no temp file stays, the server lives and, with save points
    and stop-writes-on-bgsave-error, refuses writes with MISCONF as Redis."""
    s = kv_factory("--save", "3600 100000000", "--enable-debug-command", "yes")
    c = s.client()
    c.set("good", "1")
    c.execute_command("SAVE")
    good = (s.dir / "dump.rdb").read_bytes()
    subprocess.run(["prlimit", "--pid", str(s.proc.pid), f"--fsize={64 * 1024}:unlimited"], check=True)
    c.execute_command("DEBUG", "POPULATE", 20000, "key", 100)
    assert c.execute_command("BGSAVE")
    wait_for(lambda: info(c, "persistence")["rdb_bgsave_in_progress"] == 0, 20, "bgsave end")
    p = info(c, "persistence")
    assert p["rdb_last_bgsave_status"] == "err"
    assert "Write error saving DB on disk: File too large" in s.output()
    assert "Background saving error" in s.output()
    assert (s.dir / "dump.rdb").read_bytes() == good
    assert not list(s.dir.glob("temp-*.rdb"))
    with pytest.raises(redis.ResponseError, match="^MISCONF "):
        c.set("x", 1)
    assert c.get("good") == b"1"  # reads still work
    with pytest.raises(redis.ResponseError):
        c.execute_command("SAVE")  # foreground: same error, the server lives
    assert (s.dir / "dump.rdb").read_bytes() == good
    # room again: the next BGSAVE succeeds and writes are accepted
    subprocess.run(["prlimit", "--pid", str(s.proc.pid), "--fsize=unlimited:unlimited"], check=True)
    c.execute_command("BGSAVE")
    wait_for(lambda: info(c, "persistence")["rdb_last_bgsave_status"] == "ok", 20, "bgsave ok")
    assert c.set("x", 1)
    assert s.stop() == 0
