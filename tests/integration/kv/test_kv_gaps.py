"""Small gaps of Redis 7.0.15's own suite (server-starting mode), side by side
with a real redis-server: OBJECT ENCODING of strings changed in place and of
sets (intset vs hashtable, sticky once converted), ..."""
from __future__ import annotations

from kvlib import (both as _both, call as _call, on_both, run_both as _run_both, start_redis,
                   stop_redis)


STRING_ENCODINGS = [
    ("SET", "k", "1234"), ("OBJECT", "ENCODING", "k"),
    ("SETRANGE", "k", "0", "2"), ("OBJECT", "ENCODING", "k"), ("GET", "k"),
    ("SET", "k", "1234"), ("SETRANGE", "k", "0", ""), ("OBJECT", "ENCODING", "k"),
    ("SETRANGE", "k", "5", "2"), ("OBJECT", "ENCODING", "k"),
    ("SET", "k", "foo"), ("OBJECT", "ENCODING", "k"),
    ("APPEND", "k", "bar"), ("OBJECT", "ENCODING", "k"),
    ("SET", "k", "12"), ("APPEND", "k", ""), ("OBJECT", "ENCODING", "k"),
    ("INCR", "k"), ("OBJECT", "ENCODING", "k"),
    ("APPEND", "new", "12"), ("OBJECT", "ENCODING", "new"),
    ("SETRANGE", "new2", "0", "12"), ("OBJECT", "ENCODING", "new2"),
    ("SETBIT", "b", "1", "1"), ("OBJECT", "ENCODING", "b"),
    ("SET", "b", "7"), ("BITFIELD", "b", "GET", "u8", "0"), ("OBJECT", "ENCODING", "b"),
    ("BITFIELD", "b", "SET", "u8", "0", "49"), ("OBJECT", "ENCODING", "b"), ("GET", "b"),
    ("SET", "x", "1"), ("BITOP", "OR", "dst", "x"), ("OBJECT", "ENCODING", "dst"),
    ("PFADD", "h", "a"), ("OBJECT", "ENCODING", "h"),
    ("SET", "r", "5"), ("APPEND", "r", "5"), ("RENAME", "r", "r2"), ("OBJECT", "ENCODING", "r2"),
    ("COPY", "r2", "r3"), ("OBJECT", "ENCODING", "r3"),
    ("EXPIRE", "r3", "100"), ("OBJECT", "ENCODING", "r3"),
    ("SET", "r3", "5"), ("OBJECT", "ENCODING", "r3"),
]


def test_string_changed_in_place_is_raw(kv_factory, tmp_path):
    got, want = _run_both(kv_factory, tmp_path, STRING_ENCODINGS)
    assert got == want
    assert "raw" in want and "int" in want


SET_ENCODINGS = [
    # SINTER with same integer elements but different encoding
    ("SADD", "s1", "1", "2", "3"), ("SADD", "s2", "1", "2", "3", "a"), ("SREM", "s2", "a"),
    ("OBJECT", "ENCODING", "s1"), ("OBJECT", "ENCODING", "s2"),
    ("SINTERSTORE", "i", "s1", "s2"), ("OBJECT", "ENCODING", "i"),
    ("SMEMBERS", "s1"),
    # a hashtable stays one when only integers are left; the copy too
    ("COPY", "s2", "s2c"), ("OBJECT", "ENCODING", "s2c"),
    ("RENAME", "s2c", "s2r"), ("OBJECT", "ENCODING", "s2r"),
    # SMOVE: the destination converts, a new destination takes the member's
    ("SADD", "m1", "1", "a", "b"), ("SADD", "m2", "2", "3", "4"),
    ("SMOVE", "m1", "m2", "1"), ("OBJECT", "ENCODING", "m2"),
    ("SMOVE", "m1", "m2", "a"), ("OBJECT", "ENCODING", "m2"),
    ("SMOVE", "m2", "m3", "2"), ("OBJECT", "ENCODING", "m3"),
    ("SMOVE", "m1", "m4", "b"), ("OBJECT", "ENCODING", "m4"),
    # SDIFFSTORE: Redis's two algorithms give different encodings
    ("SADD", "d1", "1", "x"), ("SADD", "d2", "x"),
    ("SDIFFSTORE", "dd", "d1", "d2"), ("OBJECT", "ENCODING", "dd"),
    ("SADD", "d3", "x", "y", "z", "w"),
    ("SDIFFSTORE", "dd", "d1", "d2", "d3", "d3", "d3"), ("OBJECT", "ENCODING", "dd"),
    ("SDIFFSTORE", "dd", "d1", "d3"), ("OBJECT", "ENCODING", "dd"),
    # the entry limit counts when a member is added, not when it changes
    ("SADD", "big", "1", "2", "3", "4"), ("CONFIG", "SET", "set-max-intset-entries", "3"),
    ("OBJECT", "ENCODING", "big"), ("SREM", "big", "4"), ("OBJECT", "ENCODING", "big"),
    ("SADD", "big", "5"), ("OBJECT", "ENCODING", "big"),
    ("SREM", "big", "5", "4"), ("OBJECT", "ENCODING", "big"),
    ("CONFIG", "SET", "set-max-intset-entries", "512"),
    ("SADD", "p", "q"), ("SPOP", "p"), ("SADD", "p", "8"), ("OBJECT", "ENCODING", "p"),
    # a reload holds each set as its members allow
    ("DEBUG", "RELOAD"), ("OBJECT", "ENCODING", "s2"), ("OBJECT", "ENCODING", "big"),
    ("SMEMBERS", "s2"),
    # a one-member hashtable answers SSCAN as one
    ("SADD", "h", "a"), ("SREM", "h", "a"), ("SADD", "h", "5"), ("SSCAN", "h", "0"),
]


def test_set_encoding_is_sticky(kv_factory, tmp_path):
    got, want = _run_both(kv_factory, tmp_path, SET_ENCODINGS)
    assert got == want
    assert want.count("intset") >= 5 and want.count("hashtable") >= 5


def _htstats_shape(text):
    """The table sizes and element counts of DEBUG HTSTATS-KEY (the chains
    depend on each server's hash seed)."""
    return [line for line in text.splitlines()
            if line.startswith(("Hash table", " table size", " number of elements"))]


def test_set_table_shrinks_after_removals(kv_factory, tmp_path):
    kv, r, proc, ref = _both(kv_factory, tmp_path)
    try:
        shapes = []
        for c in (r, ref):
            c.sadd("s", *[f"m:{i}" for i in range(64)])
            c.srem("s", *[f"m:{i}" for i in range(57)])  # 7 of 64: not yet a tenth
            before = _htstats_shape(c.execute_command("DEBUG", "HTSTATS-KEY", "s"))
            c.srem("s", "m:57")                           # 6 of 64: shrinks to 8
            after = c.execute_command("DEBUG", "HTSTATS-KEY", "s")
            shapes.append((before, _htstats_shape(after)))
            # the full form: chains counted as Redis does
            assert "different slots: " in after and "max chain length: " in after
            assert "Chain length distribution:\n" in after
        assert shapes[0] == shapes[1]
        assert any("rehashing target" in line for line in shapes[1][1])
    finally:
        stop_redis(proc, ref)


def _child_pids(pid):
    import glob
    out = []
    for f in glob.glob(f"/proc/{pid}/task/*/children"):
        with open(f) as fh:
            out += [int(x) for x in fh.read().split()]
    return out


def test_save_clears_failed_bgsave(kv_factory, tmp_path):
    """A BGSAVE child killed by a signal leaves MISCONF (with save points);
    a successful SAVE clears it, as in Redis."""
    import os
    import signal
    import time
    kv, r, proc, ref = _both(kv_factory, tmp_path)
    try:
        results = []
        for c in (r, ref):
            c.set("k", "v")
            c.config_set("save", "900 1")
            c.config_set("rdb-key-save-delay", "100000000")
            c.bgsave()
            pid = int(c.info("server")["process_id"])
            deadline = time.time() + 5
            while not _child_pids(pid) and time.time() < deadline:
                time.sleep(0.02)
            for child in _child_pids(pid):
                os.kill(child, signal.SIGKILL)
            while c.info("persistence")["rdb_bgsave_in_progress"] and time.time() < deadline:
                time.sleep(0.02)
            c.config_set("rdb-key-save-delay", "0")
            status = c.info("persistence")["rdb_last_bgsave_status"]
            denied = _call(c, "SET", "k", "w")
            saved = _call(c, "SAVE")
            results.append((status, denied[:8], saved, _call(c, "SET", "k", "w"),
                            c.info("persistence")["rdb_last_bgsave_status"]))
        assert results[0] == results[1]
        assert results[1][:2] == ("err", "ERR: MIS")
    finally:
        stop_redis(proc, ref)


def _repl_stream(port):
    import sys
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from test_kv_wsuite import _ReplStream
    return _ReplStream(port)


def _xreadgroup_stream(c, port):
    c.config_set("repl-ping-replica-period", 3600)
    st = _repl_stream(port)
    try:
        for i in range(1, 4):
            c.xadd("s", {"f": "v"}, id=f"1-{i}")
        c.xgroup_create("s", "g", 0)
        with c.pipeline(transaction=True) as p:
            p.execute_command("XREADGROUP", "GROUP", "g", "c1", "COUNT", "2", "STREAMS", "s", ">")
            p.execute_command("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">")
            p.execute()
        c.xadd("s", {"f": "v"}, id="1-4")
        c.execute_command("XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "s", ">")
        c.xadd("s", {"f": "v"}, id="1-5")
        c.execute_command("XREADGROUP", "GROUP", "g", "c1", "NOACK", "STREAMS", "s", ">")
        c.set("end", "1")
        out = []
        while not out or out[-1][0] != "set":
            cmd = st.command()
            out.append([a for a in cmd if not a.isdigit() or len(a) < 10])  # (no TIME values)
        return out
    finally:
        st.close()


def test_xreadgroup_propagates_setid_only_with_noack(kv_factory, tmp_path):
    got, want = on_both(kv_factory, tmp_path, _xreadgroup_stream)
    assert got == want
    assert [c[0] for c in want].count("xclaim") == 4


def test_exec_schedules_forks(kv_factory, tmp_path):
    """BGREWRITEAOF, BGSAVE and CONFIG SET appendonly yes inside EXEC only
    schedule the fork (the cron starts it after), as Redis's in_exec."""
    import time
    kv, r, proc, ref = _both(kv_factory, tmp_path)
    try:
        out = []
        for c in (r, ref):
            for name in ("BGREWRITEAOF", "BGSAVE"):  # the status text, not True
                c.response_callbacks.pop(name, None)
            forks = c.info("stats")["total_forks"]
            replies = []
            for cmd in (("BGREWRITEAOF",), ("BGSAVE",), ("CONFIG", "SET", "appendonly", "yes")):
                with c.pipeline(transaction=True) as p:
                    p.set("foo", "bar")
                    p.execute_command(*cmd)
                    replies.append(p.execute()[1])
                deadline = time.time() + 10
                while time.time() < deadline:
                    p = c.info("persistence")
                    if not (p["aof_rewrite_in_progress"] or p["aof_rewrite_scheduled"] or
                            p["rdb_bgsave_in_progress"]):
                        break
                    time.sleep(0.05)
            out.append((replies, c.info("stats")["total_forks"] - forks,
                        c.info("persistence")["aof_enabled"]))
        assert out[0] == out[1]
        assert out[1][0][:2] == ["Background append only file rewriting scheduled",
                                 "Background saving scheduled"]
        assert "AOF was enabled during a transaction. An AOF background was scheduled" \
            in kv.output()
    finally:
        stop_redis(proc, ref)


def _scan_expire_stream(c, port):
    import time
    c.config_set("repl-ping-replica-period", 3600)
    c.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    for k in ("foo1", "foo2", "bar1"):
        c.set(k, "v", px=1)
    c.set("foo3", "v")
    time.sleep(0.01)
    st = _repl_stream(port)
    try:
        keys = sorted(c.scan(0, match="foo*", count=100)[1])
        c.set("end", "1")
        out = []
        while not out or out[-1][0] != "set":
            out.append(st.command())
        return keys, sorted(map(tuple, out[1:-1])), c.dbsize()
    finally:
        st.close()


def test_scan_expires_what_it_passes(kv_factory, tmp_path):
    got, want = on_both(kv_factory, tmp_path, _scan_expire_stream)
    assert got == want
    assert want[1] == [("del", "foo1"), ("del", "foo2")]


def _tracking_limit_before_queueing(c, port):
    import socket
    import time
    c.config_set("tracking-table-max-keys", 2)
    c.execute_command("DEBUG", "PAUSE-CRON", "1")
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        def roundtrip(data, want):
            s.sendall(data)
            got = b""
            deadline = time.time() + 5
            while want not in got and time.time() < deadline:
                got += s.recv(65536)
            return got
        roundtrip(b"HELLO 3\r\n", b"modules")
        roundtrip(b"CLIENT TRACKING on\r\n", b"+OK\r\n")
        roundtrip(b"MGET 1{tag} 2{tag}\r\n", b"_\r\n_\r\n")
        roundtrip(b"MULTI\r\n", b"+OK\r\n")
        c.config_set("tracking-table-max-keys", 1)
        got = roundtrip(b"PING\r\nEXEC\r\n", b"PONG\r\n")
        time.sleep(0.1)
        s.setblocking(False)
        try:
            got += s.recv(65536)
        except BlockingIOError:
            pass
        return got.replace(b"1{tag}", b"K").replace(b"2{tag}", b"K")
    finally:
        s.close()
        c.execute_command("DEBUG", "PAUSE-CRON", "0")


def test_tracking_limit_applies_before_queueing(kv_factory, tmp_path):
    """Redis #11715: the tracking table is cut to tracking-table-max-keys
    before each command, a queued one too (the invalidation comes first)."""
    got, want = on_both(kv_factory, tmp_path, _tracking_limit_before_queueing)
    assert got == want
    assert want.startswith(b">2\r\n$10\r\ninvalidate\r\n") and b"+QUEUED\r\n" in want


def _lazyfreed_counts(c):
    import time
    out = []
    c.config_set("stream-node-max-entries", 1)

    def after(fn):
        c.config_resetstat()
        fn()
        time.sleep(0.1)  # Redis frees in a background thread
        out.append(c.info("memory")["lazyfreed_objects"])

    for n in (30, 32):  # a stream of n blocks: about 2n + 1 radix nodes
        c.delete("s")
        for i in range(n):
            c.xadd("s", {"a": "b"}, id=f"{i + 1}-0")
        after(lambda: c.unlink("s"))
    c.xadd("s", {"a": "b"}, id="1-0")
    c.xgroup_create("s", "g", 0)
    c.xgroup_destroy("s", "g")
    after(lambda: c.unlink("s"))
    for n in (64, 65):
        c.sadd("set", *[f"m{i}" for i in range(n)])
        after(lambda: c.unlink("set"))
        c.zadd("z", {f"m{i}": i for i in range(n * 3)})
        after(lambda: c.unlink("z"))
    c.rpush("l", *(["x" * 1000] * 560))
    after(lambda: c.delete("l"))          # DEL frees at once...
    c.config_set("lazyfree-lazy-user-del", "yes")
    c.rpush("l", *(["x" * 1000] * 560))
    after(lambda: c.delete("l"))          # ...unless lazyfree-lazy-user-del
    c.config_set("lazyfree-lazy-user-del", "no")
    c.mset({"a": 1, "b": 2, "c": 3})
    after(lambda: c.execute_command("FLUSHALL", "ASYNC"))
    c.mset({"a": 1, "b": 2})
    after(lambda: c.execute_command("FLUSHDB"))
    return out


def test_lazyfreed_objects_counted_as_redis(kv_factory, tmp_path):
    got, want = on_both(kv_factory, tmp_path, lambda c, _port: _lazyfreed_counts(c))
    assert got == want
    assert want[:3] == [0, 1, 0] and 3 in want


def test_big_command_argument_arrays_shrink(kv):
    """A command with 100000 arguments leaves no big arrays behind once the
    client is idle (Redis frees its argv after each command): UNLINK gives
    used_memory back (the suite's lazyfree test)."""
    import time
    r = kv.client(decode_responses=True)
    orig = r.info("memory")["used_memory"]
    r.sadd("myset", *range(100000))
    peak = r.info("memory")["used_memory"]
    r.unlink("myset")
    deadline = time.time() + 5
    while r.info("memory")["used_memory"] >= orig * 2 and time.time() < deadline:
        time.sleep(0.1)
    assert peak > orig + 1000000
    assert r.info("memory")["used_memory"] < orig * 2
    me = [x for x in r.client_list() if x["cmd"] == "client|list"][0]
    assert int(me["tot-mem"]) < 64 * 1024


def _link_status(c, deadline_s, want):
    import time
    deadline = time.time() + deadline_s
    while time.time() < deadline:
        status = c.info("replication").get("master_link_status")
        if status == want:
            return status
        time.sleep(0.05)
    return c.info("replication").get("master_link_status")


def test_masterauth_is_binary(kv_factory, tmp_path):
    """CONFIG SET masterauth keeps a NUL byte: a replica (brisk-kv, then
    Redis) of a real Redis master whose password is "abc\\0def" syncs with
    that password and not with "abc" (the suite's MASTERAUTH test)."""
    kv = kv_factory(workdir=tmp_path / "kv")
    (tmp_path / "m").mkdir()
    (tmp_path / "ref").mkdir()
    mproc, master = start_redis(tmp_path / "m")
    rproc, ref = start_redis(tmp_path / "ref", decode_responses=True)
    try:
        master.config_set("requirepass", b"abc\x00def")
        mport = master.connection_pool.connection_kwargs["port"]
        out = []
        for c in (kv.client(decode_responses=True), ref):
            c.execute_command("REPLICAOF", "127.0.0.1", mport)
            c.config_set("masterauth", "abc")
            wrong = _link_status(c, 1.5, "up")
            c.config_set("masterauth", b"abc\x00def")
            out.append((wrong, _link_status(c, 10, "up")))
            c.execute_command("REPLICAOF", "NO", "ONE")
        assert out == [("down", "up"), ("down", "up")]
    finally:
        stop_redis(rproc, ref)
        stop_redis(mproc, master)


def _failed_shutdown_save(c, workdir):
    """dump.rdb is a directory, so the shutdown's save fails: a SIGTERM
    leaves the server running, SHUTDOWN answers an error, SHUTDOWN NOSAVE
    works."""
    import os
    import signal
    import time
    c.config_set("save", "900 1")
    c.set("k", "v")
    (workdir / "dump.rdb").mkdir()
    pid = int(c.info("server")["process_id"])
    os.kill(pid, signal.SIGTERM)
    time.sleep(0.5)
    alive = c.ping()
    err = _call(c, "SHUTDOWN")
    return alive, err, c.ping()


def test_shutdown_goes_on_when_its_save_fails(kv_factory, tmp_path):
    kv = kv_factory(workdir=tmp_path / "kv")
    (tmp_path / "ref").mkdir()
    proc, ref = start_redis(tmp_path / "ref", decode_responses=True)
    try:
        got = _failed_shutdown_save(kv.client(decode_responses=True), tmp_path / "kv")
        want = _failed_shutdown_save(ref, tmp_path / "ref")
        assert got == want
        assert want == (True, "ERR: Errors trying to SHUTDOWN. Check logs.", True)
        assert kv.output().count("Error trying to save the DB, can't exit.") == 2
        (tmp_path / "kv" / "dump.rdb").rmdir()
    finally:
        stop_redis(proc, ref)


def _second_sigint(c, workdir):
    """A second SIGINT while the shutdown saves (slowly: rdb-key-save-delay)
    exits at once and removes the temp file."""
    import os
    import signal
    import time
    c.config_set("save", "900 1")
    for i in range(20):
        c.set(str(i), i)
    c.config_set("rdb-key-save-delay", "100000")
    pid = int(c.info("server")["process_id"])
    temp = workdir / f"temp-{pid}.rdb"
    os.kill(pid, signal.SIGINT)
    deadline = time.time() + 5
    while not temp.exists() and time.time() < deadline:
        time.sleep(0.01)
    existed = temp.exists()
    os.kill(pid, signal.SIGINT)
    deadline = time.time() + 5
    while temp.exists() and time.time() < deadline:
        time.sleep(0.01)
    return existed, temp.exists(), (workdir / "dump.rdb").exists()


def test_second_sigint_exits_without_temp_file(kv_factory, tmp_path):
    kv = kv_factory(workdir=tmp_path / "kv")
    kv.expect_exit = True  # exit status 1, as Redis
    (tmp_path / "ref").mkdir()
    proc, ref = start_redis(tmp_path / "ref", decode_responses=True)
    try:
        got = _second_sigint(kv.client(decode_responses=True), tmp_path / "kv")
        want = _second_sigint(ref, tmp_path / "ref")
        assert got == want == (True, False, False)
        assert kv.proc.wait(5) == 1 and proc.wait(5) == 1
    finally:
        stop_redis(proc, ref)


def _paused_replica_offsets(c, master):
    import time
    mport = master.connection_pool.connection_kwargs["port"]
    c.execute_command("REPLICAOF", "127.0.0.1", mport)
    assert _link_status(c, 10, "up") == "up"
    master.set("foo", "bar")

    def offsets():
        i = c.info("replication")
        return i["slave_read_repl_offset"], i["slave_repl_offset"]

    deadline = time.time() + 5
    while offsets()[1] != master.info("replication")["master_repl_offset"] and \
            time.time() < deadline:
        time.sleep(0.02)
    before = master.info("replication")["master_repl_offset"]
    c.execute_command("CLIENT", "PAUSE", "100000", "WRITE")
    master.set("foo2", "bar2")
    after = master.info("replication")["master_repl_offset"]
    deadline = time.time() + 5
    while offsets()[0] != after and time.time() < deadline:
        time.sleep(0.02)
    paused = offsets()
    c.execute_command("CLIENT", "UNPAUSE")
    deadline = time.time() + 5
    while offsets()[1] != after and time.time() < deadline:
        time.sleep(0.02)
    resumed = offsets()
    c.execute_command("REPLICAOF", "NO", "ONE")
    return paused == (after, before), resumed == (after, after), c.get("foo2")


def test_paused_replica_reads_but_does_not_apply(kv_factory, tmp_path):
    kv = kv_factory(workdir=tmp_path / "kv")
    (tmp_path / "m").mkdir()
    (tmp_path / "ref").mkdir()
    mproc, master = start_redis(tmp_path / "m", decode_responses=True)
    rproc, ref = start_redis(tmp_path / "ref", decode_responses=True)
    try:
        master.config_set("repl-ping-replica-period", 3600)
        got = _paused_replica_offsets(kv.client(decode_responses=True), master)
        want = _paused_replica_offsets(ref, master)
        assert got == want == (True, True, "bar2")
    finally:
        stop_redis(rproc, ref)
        stop_redis(mproc, master)


LOGLEVELS = [("CONFIG", "GET", "loglevel")] + [
    cmd for level in ("debug", "verbose", "notice", "warning", "DEBUG", "bogus")
    for cmd in (("CONFIG", "SET", "loglevel", level), ("CONFIG", "GET", "loglevel"))]


def test_loglevel_debug_is_kept(kv_factory, tmp_path):
    got, want = _run_both(kv_factory, tmp_path, LOGLEVELS)
    assert got == want
    assert ["loglevel", "debug"] in want


def _proc_titles(c):
    import time
    port = c.connection_pool.connection_kwargs["port"]
    pid = int(c.info("server")["process_id"])
    out = []
    for t in ("TEST {listen-addr} {port} {tls-port} {server-mode}x {{y} a}}b}",
              "{invalid-var}", "{title", "{}", "   ", "{port}"):
        out.append(_call(c, "CONFIG", "SET", "proc-title-template", t))
        time.sleep(0.05)
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            out.append(f.read().split(b"\0")[0].replace(str(port).encode(), b"P"))
    out.append(c.config_get("proc-title-template"))
    return out


def test_proc_title_template(kv_factory, tmp_path):
    kv, r, proc, ref = _both(kv_factory, tmp_path)
    try:
        got, want = _proc_titles(r), _proc_titles(ref)
        assert got == want
        assert want[1] == b"TEST 127.0.0.1:P P 0 x {y} a}}b}" and want[-1] == {
            "proc-title-template": "{port}"}
    finally:
        stop_redis(proc, ref)


RENAMED = [("FLUSHDB",), ("badger",), ("BADGER",), ("SET", "k", "v"), ("KEYS", "*"),
           ("EVAL", "return redis.call('badger')", "0"), ("EVAL", "return redis.call('flushdb')", "0"),
           ("CONFIG", "SET", "rename-command", "get x"), ("GET", "k")]


def test_rename_command(kv_factory, tmp_path):
    """rename-command (configuration only): the command answers to its new
    name only, scripts included; "" removes it."""
    got, want = _run_both(kv_factory, tmp_path, RENAMED, "--rename-command", "flushdb", "badger",
                          "--rename-command", "keys", "")
    assert got == want
    assert want[1] == "OK" and want[0].startswith("ERR: unknown command 'FLUSHDB'")


def test_spop_of_most_members_remakes_the_set(kv_factory, tmp_path):
    """SPOP of most of a set (count >= 5 x what stays) leaves a new set made
    of the rest, whose encoding follows its members (Redis's case 3)."""
    kv, r, proc, ref = _both(kv_factory, tmp_path)
    try:
        out = []
        for c in (r, ref):
            encs = []
            for pop in (8, 9):  # 2 left (popped one by one), then 1 left
                c.delete("s")
                c.sadd("s", *range(1, 11), "a")
                c.srem("s", "a")
                c.spop("s", pop)
                encs.append(c.object("encoding", "s"))
            out.append(encs)
        assert out[0] == out[1] == ["hashtable", "intset"]
    finally:
        stop_redis(proc, ref)
