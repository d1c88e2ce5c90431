"""What Redis 7.0.15's integration/replication and integration/rdb suites
check, with real redis-server processes side by side: function libraries in
the RDB (both ways, and a full sync replaces the replica's libraries),
loading / async_loading while a diskless load (repl-diskless-load swapdb)
is in progress, a BGSAVE child's copy-on-write and progress in INFO, a
replica link that touches the keyspace, DEBUG LOG, and the full-sync child
killed when no replica waits for it."""
from __future__ import annotations

import time

import pytest
import redis

from test_kv_replication import REDIS_SERVER, info, real, wait_for, wait_link_up  # noqa: F401

pytestmark = pytest.mark.skipif(not REDIS_SERVER, reason="redis-server is not installed")

LIB1 = "#!lua name=test\nredis.register_function('test', function() return 'hello1' end)"
LIB2 = "#!lua name=test\nredis.register_function('test', function() return 'hello2' end)"
LIB3 = "#!lua name=other\nredis.register_function('f3', function() return 'three' end)"


def test_functions_in_rdb_both_ways(kv_factory, real, tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    kv = kv_factory(workdir=d)
    c = kv.client()
    c.function_load(LIB1)
    c.function_load(LIB3)
    c.set("k", "v")
    assert c.save()
    kv.restart()
    c = kv.client()
    assert c.fcall("test", 0) == b"hello1" and c.fcall("f3", 0) == b"three"
    # brisk-kv's dump.rdb in real Redis
    rr = real("--dir", str(d))
    rc = rr.client()
    assert rc.fcall("test", 0) == b"hello1" and rc.fcall("f3", 0) == b"three"
    assert rc.get("k") == b"v"
    # and Redis's dump.rdb (a library replaced) back in brisk-kv
    rc.function_load(LIB2, replace=True)
    assert rc.save()
    rr.stop()
    kv.stop()
    kv.start()
    assert kv.client().fcall("test", 0) == b"hello2"


def codes(c):
    return [lib[b"library_code"] if isinstance(lib, dict) else dict(zip(lib[::2], lib[1::2]))[b"library_code"]
            for lib in c.execute_command("FUNCTION", "LIST", "WITHCODE")]


@pytest.mark.parametrize("master_kind", ["brisk", "redis"])
def test_full_sync_replaces_functions(kv_factory, real, master_kind):
    nodelay = ("--repl-diskless-sync-delay", "0")
    m = kv_factory(*nodelay) if master_kind == "brisk" else real(*nodelay)
    mc = m.client()
    mc.function_load(LIB2)
    r = kv_factory("--repl-diskless-load", "swapdb")
    rc = r.client()
    rc.function_load(LIB1)
    rc.function_load(LIB3)
    rc.replicaof("127.0.0.1", m.port)
    wait_link_up(rc)
    # the master's library only: the replica's own ones are gone, as in Redis
    assert codes(rc) == [LIB2.encode()]
    # a real Redis replica of brisk-kv gets them too
    if master_kind == "brisk":
        rr = real("--replicaof", "127.0.0.1", str(m.port))
        wait_link_up(rr.client())
        assert codes(rr.client()) == [LIB2.encode()]


@pytest.mark.parametrize("same_history", [False, True])
def test_diskless_load_swapdb_loading_flags(kv_factory, real, same_history):
    """While a swapdb diskless load runs: a new history shows loading:1 and
    clients get LOADING; the master's own history (a full sync again) shows
    async_loading:1 and the old data is served. A failed transfer leaves the
    old data; a finished one replaces it."""
    m = real("--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
             "--rdbcompression", "no", "--enable-debug-command", "yes")
    mc = m.client()
    r = kv_factory("--repl-diskless-load", "swapdb", "--replica-read-only", "no")
    rc = r.client()
    if same_history:
        rc.replicaof("127.0.0.1", m.port)
        wait_link_up(rc)
    for i in range(200):
        rc.set(f"slave:{i}", "x")
    rc.set("mykey", "myvalue")
    mc.execute_command("DEBUG", "POPULATE", 1000, "master", 1000)  # not replicated
    mc.config_set("rdb-key-save-delay", 5000)  # 1000 keys: 5 s of transfer
    if same_history:
        # force another full sync with the same replid: backlog overrun
        mc.config_set("repl-backlog-size", 16384)
        mc.client_kill_filter(_type="slave")
        for i in range(10):
            mc.set(f"fill{i}", "A" * 16384)
    else:
        rc.replicaof("127.0.0.1", m.port)
    flag = "async_loading" if same_history else "loading"
    other = "loading" if same_history else "async_loading"
    wait_for(lambda: info(rc, "persistence")[flag] == 1, 20, flag)
    assert info(rc, "persistence")[other] == 0
    if same_history:
        assert rc.get("mykey") == b"myvalue" and rc.dbsize() == 201
        for cmd in (("CONFIG", "SET", "appendonly", "no"), ("REPLICAOF", "NO", "ONE"),
                    ("BGSAVE",)):
            with pytest.raises(redis.exceptions.BusyLoadingError):
                rc.execute_command(*cmd)
    else:
        with pytest.raises(redis.exceptions.BusyLoadingError):
            rc.get("mykey")
    # the master drops the link mid-transfer: the old data stays
    mc.config_set("repl-diskless-sync-delay", 5)
    mc.client_kill_filter(_type="slave")
    wait_for(lambda: info(rc, "persistence")[flag] == 0, 20, f"{flag} ends")
    assert rc.get("mykey") == b"myvalue" and rc.dbsize() == 201
    assert "Internal error in RDB" in r.output()  # the transfer broke off
    # and a finished transfer replaces it
    mc.config_set("rdb-key-save-delay", 0)
    mc.config_set("repl-diskless-sync-delay", 0)
    wait_link_up(rc)
    wait_for(lambda: rc.dbsize() == mc.dbsize(), 20, "same size")
    assert rc.get("mykey") is None


def test_bgsave_child_reports_cow_and_progress(kv_factory):
    """The suite's 'Test child sending info': current_cow_size grows while
    the parent changes keys under a running BGSAVE, keys processed and
    fork percentage advance, rdb_last_cow_size stays after the child."""
    kv = kv_factory("--enable-debug-command", "yes")
    c = kv.client()
    st = info(c, "persistence")
    assert st["current_cow_size"] == 0 and st["current_save_keys_total"] == 0
    assert st["rdb_last_cow_size"] == 0
    c.execute_command("DEBUG", "POPULATE", 10000, "key", 500)
    c.config_set("rdb-key-save-delay", 300)
    c.bgsave()
    assert info(c, "persistence")["current_save_keys_total"] == 10000
    seen = []
    for it in range(2):
        before = info(c, "persistence")
        for k in range(16):
            c.setrange(f"key:{it * 16 + k}", 0, "B" * 500)
        wait_for(lambda: (lambda s: s["rdb_bgsave_in_progress"] == 0 or
                          (s["current_cow_size"] >= before["current_cow_size"] + 4096 and
                           s["current_save_keys_processed"] > before["current_save_keys_processed"]
                           and s["current_fork_perc"] > 0))(info(c, "persistence")), 10,
                 "a COW report")
        seen.append(info(c, "persistence")["current_cow_size"])
    wait_for(lambda: info(c, "persistence")["rdb_bgsave_in_progress"] == 0, 30, "bgsave end")
    st = info(c, "persistence")
    assert st["rdb_last_bgsave_status"] == "ok"
    assert st["rdb_last_cow_size"] >= 0.9 * max(seen) > 0
    assert st["current_cow_size"] == 0 and st["current_save_keys_total"] == 0


def test_replica_link_cannot_touch_keys(kv_factory):
    kv = kv_factory()
    c = kv.client()
    c.set("foo", "bar")
    import socket
    s = socket.create_connection(("127.0.0.1", kv.port), timeout=10)
    s.sendall(b"PSYNC replicationid -1\r\n")
    got = b""
    while b"\r\n" not in got:
        got += s.recv(100)
    assert got.lstrip(b"\n").startswith(b"+FULLRESYNC")
    s.sendall(b"GET foo\r\n")
    wait_for(lambda: "Replica can't interact with the keyspace" in kv.output(), 10, "the log line")
    out = kv.output()
    assert "== CRITICAL == This master is sending an error to its replica" in out
    assert "Replica generated a reply to command 'get', disconnecting it" in out
    s.close()
    assert c.ping()


def test_debug_log(kv_factory):
    kv = kv_factory("--enable-debug-command", "yes")
    assert kv.client().execute_command("DEBUG", "LOG", "hello marker") == b"OK"
    assert "DEBUG LOG: hello marker" in kv.output()


def test_useless_sync_child_is_killed(kv_factory, real):
    """Two replicas wait for a slow disk-based full sync; when both leave
    (and no save points), the child stops; with save points it runs on."""
    m = kv_factory("--repl-diskless-sync", "no")
    mc = m.client()
    for i in range(10):
        mc.set(i, i)
    mc.config_set("rdb-key-save-delay", 1000000)
    reps = [real(), real()]
    for rr in reps:
        rr.client().replicaof("127.0.0.1", m.port)
    wait_for(lambda: info(mc, "persistence")["rdb_bgsave_in_progress"] == 1, 10, "child")
    wait_for(lambda: info(mc)["connected_slaves"] == 2, 10, "two replicas")
    reps[0].client().replicaof("no", "one")
    time.sleep(0.2)
    assert info(mc, "persistence")["rdb_bgsave_in_progress"] == 1
    reps[1].client().replicaof("no", "one")
    wait_for(lambda: info(mc, "persistence")["rdb_bgsave_in_progress"] == 0, 5, "child killed")
    assert not list(m.dir.glob("temp-*.rdb"))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", ["swapdb", "on-empty-db"])
def test_streamed_diskless_load_paces_the_master(kv_factory, mode):
    """A diskless load takes the RDB key by key as it comes (key-load-delay
    slows it as in Redis's tests): the master's sync child waits for the
    slow replica instead of handing it 100+ MB at once, and the data ends
    equal (DEBUG DIGEST, the function library, TTLs)."""
    m = kv_factory("--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
                   "--rdbcompression", "no", "--enable-debug-command", "yes")
    mc = m.client()
    mc.execute_command("DEBUG", "POPULATE", 3000, "test", 10000)
    for i in range(100):
        mc.rpush(f"l{i}", "a", i)
        mc.setex(f"e{i}", 1000, "v")
    mc.function_load(LIB2)
    r = kv_factory("--repl-diskless-load", mode, "--key-load-delay", "1000",
                   "--loading-process-events-interval-bytes", "65536",
                   "--enable-debug-command", "yes")
    rc = r.client()
    rc.replicaof("127.0.0.1", m.port)
    wait_for(lambda: info(rc, "persistence")["loading"] == 1, 30, "loading")
    assert "Loading DB in memory" in r.output()
    time.sleep(0.5)
    # the replica is still loading and answers INFO meanwhile; the master's
    # child still waits on it (3000 keys x 1 ms is over 3 seconds)
    assert info(rc, "persistence")["loading"] == 1
    assert info(mc, "persistence")["rdb_bgsave_in_progress"] == 1
    wait_link_up(rc)
    digest = [c.execute_command("DEBUG", "DIGEST")
              for c in (r.client(socket_timeout=300), m.client(socket_timeout=300))]
    assert digest[0] == digest[1]
    assert rc.ttl("e5") > 900 and codes(rc) == [LIB2.encode()]
    assert "Finished with success" in r.output()


@pytest.mark.parametrize("payload", [
    b"REDIS0010\xfa\x03abc",                       # cut short inside an aux field
    b"REDIS0010\x00\x03key\xff\xff\xff\xff\xff",   # a string value longer than everything
    b"REDIS0099\xff",                              # a version it cannot read
    b"NOTREDIS!" + b"\x00" * 64,                   # not an RDB
    b"REDIS0010\x00\x01k\x01v\xff" + b"\x00" * 8 + b"trailing",  # checksum 0, then junk
])
def test_streamed_load_of_a_bad_rdb_keeps_the_data(kv_factory, payload):
    """A fake master sends a diskless (EOF-marked) RDB that is cut short or
    corrupt: the replica logs it, keeps its old data, and stays up."""
    import socket
    import threading
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]
    mark = b"a" * 40

    def fake_master():
        srv.settimeout(20)
        try:
            conn, _ = srv.accept()
        except OSError:
            return
        conn.settimeout(20)
        buf = b""
        try:
            answered = 0
            psync = False
            while not psync:
                got = conn.recv(4096)
                if not got:
                    return
                buf += got
                # one answer per command (PING, AUTH, REPLCONF), PSYNC's below
                cmds = (b"\r\n" + buf).split(b"\r\n*")[1:]
                psync = any(b"$5\r\nPSYNC\r\n" in c.upper() for c in cmds)
                done = [c for c in cmds if b"$5\r\nPSYNC\r\n" not in c.upper()]
                conn.sendall(b"+OK\r\n" * (len(done) - answered))
                answered = len(done)
            conn.sendall(b"+FULLRESYNC " + b"b" * 40 + b" 0\r\n$EOF:" + mark + b"\r\n")
            conn.sendall(payload + mark)
            time.sleep(1)
        except OSError:
            pass
        conn.close()

    t = threading.Thread(target=fake_master, daemon=True)
    t.start()
    r = kv_factory("--repl-diskless-load", "swapdb")
    rc = r.client()
    rc.set("mine", "1")
    rc.replicaof("127.0.0.1", port)
    t.join(25)
    srv.close()
    rc.replicaof("no", "one")
    assert info(rc, "persistence")["loading"] == 0
    out = r.output()
    if "Finished with success" in out:  # the last one is a good RDB (no checksum)
        assert rc.get("k") == b"v" and rc.get("mine") is None
    else:
        assert "Internal error in RDB" in out, out[-2000:]
        assert rc.get("mine") == b"1"


@pytest.mark.timeout(180)
def test_stalled_replica_is_cut_from_a_full_sync(kv_factory):
    """The suite's 'diskless timeout replicas drop during rdb pipe': a replica
    that stops reading mid-transfer (SIGSTOP) is dropped after repl-timeout
    and the other one still gets the whole dataset."""
    import signal as sig
    m = kv_factory("--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "1",
                   "--repl-diskless-sync-max-replicas", "2", "--rdbcompression", "no",
                   "--enable-debug-command", "yes")
    mc = m.client()
    mc.execute_command("DEBUG", "POPULATE", 3000, "test", 10000)  # 30 MB: past the socket buffers
    slow = kv_factory("--repl-diskless-load", "swapdb", "--key-load-delay", "100")
    fast = kv_factory("--enable-debug-command", "yes")
    slow.client().replicaof("127.0.0.1", m.port)
    fast.client().replicaof("127.0.0.1", m.port)
    wait_for(lambda: "Loading DB in memory" in slow.output(), 30, "the slow load")
    mc.config_set("repl-timeout", 2)
    slow.proc.send_signal(sig.SIGSTOP)
    try:
        wait_for(lambda: "Disconnecting timedout replica (full sync)" in m.output(), 40, "the cut")
        wait_for(lambda: info(mc, "persistence")["rdb_bgsave_in_progress"] == 0, 60, "child end")
        wait_link_up(fast.client())
        assert "done reading from pipe, 1 replicas still up" in m.output()
        digest = [c.execute_command("DEBUG", "DIGEST")
                  for c in (fast.client(socket_timeout=300), m.client(socket_timeout=300))]
        assert digest[0] == digest[1]
    finally:
        slow.proc.send_signal(sig.SIGCONT)
