"""Hostile input for the Lua debugger (SCRIPT DEBUG YES / SYNC) and the
multi-part AOF manifest reader: legal but extreme arguments, garbage, NULs,
endless code, self-referencing tables. Each session is sent to brisk-kv and a
real redis-server 7 side by side and every byte compared, except where Redis
itself crashes or hangs: there brisk-kv must answer a clear error instead."""
from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from kvlib import KV_BIN, REDIS_SERVER, free_port
from test_kv_ldb import enc, port_of, read_reply, same, session

SRC = "local a = 1\nlocal t = {1,2,3}\nlocal b = 2\nreturn a"
SYNC = ("script", "debug", "sync")
START = [SYNC, ("eval", SRC, "0")]


@pytest.mark.parametrize("steps", [
    # numbers read whole (not cut at 31 bytes), as atoi reads them
    START + [("l", "0" * 40 + "2", "0"), ("m", "0" * 33 + "70"), ("m",), ("c",)],
    START + [("l", "-9223372036854775808", "-9223372036854775808"),
             ("l", "9223372036854775808", "1"), ("l", "2", "2147483648"),
             ("l", "2", "-2147483649"), ("l", "2", "99999999999999999999"),
             ("m", "-9223372036854775808"), ("m", "9223372036854775808"), ("m", "4294967396"),
             ("m", "-1"), ("c",)],
    # break takes any 64-bit number and uses it as a C int, as Redis
    START + [("b", "-9223372036854775808"), ("b", "9223372036854775807"),
             ("b", "9223372036854775808"), ("b", "4294967299"), ("b",), ("b", "-4294967299"),
             ("b", "2147483648"), ("b", "-2147483648"), ("b", "5\0x"), ("b", "x" * 600),
             ("b",), ("c",)],
    # long messages whole: a Lua error, a long argument echoed
    START + [("e", "error('x'..string.rep('y',1000))"), ("m", "0"),
             ("e", "string.rep('q',3000)"), ("e", "error('a\\0b')"), ("c",)],
    # NULs in a logged command and in the source do not shift the log
    START + [("r", "set", "a\0b", "c"), ("r", "get", "a\0b"), ("s",), ("c",)],
    [SYNC, ("eval", "local a = 1 -- x\0y\nreturn a", "0"), ("l",), ("w",), ("c",)],
    # a local with a long name, printed unlimited
    [SYNC, ("eval", "local " + "v" * 400 + " = 1\nreturn 1", "0"), ("s",), ("m", "0"), ("p",),
     ("c",)],
    # the protocol parser: "\r\n" searched (not a lone "\r"), a NUL ends the text
    START + [b"*1\rX\r\n$1\r\ns\r\n", ("c",)],
    START + [b"\0*1\r\n$1\r\ns\r\n"],
    # XREAD BLOCK: the command's own error, logged as its reply
    START + [("r", "xread", "block", "0", "streams", "s", "$"), ("c",)],
    # SCRIPT DEBUG with a reply still pending (a pipeline): refused
    [b"PING\r\nSCRIPT DEBUG YES\r\n", ("eval", "return 1", "0")],
])
def test_ldb_hostile_as_redis(kv, reference, steps):
    same(session(kv.port, steps), session(port_of(reference), steps), steps)


@pytest.mark.parametrize("code", ["error({})", "error(nil)", "redis.call('nosuch')"])
def test_ldb_eval_error_object_not_a_string(kv, code):
    """Redis crashes here (its log formats a NULL string); brisk-kv logs a
    clear error and the session goes on."""
    out = session(kv.port, START + [("e", code), ("e", "1+1"), ("c",)])
    assert out[2].startswith(b"*1\r\n+<error> "), out
    assert b"Unknown Redis command" in out[2] or b"not a string" in out[2], out
    assert out[3] == b"*1\r\n+<retval> 2\r\n"
    assert out[4].endswith(b":1\r\n<EOF>")
    assert kv.client().ping()


def test_ldb_eval_endless_loop_times_out(kv_factory):
    """Redis loops for ever (in SYNC mode the whole server with it): here the
    debugger's eval fails past the script time limit, and so does code it
    made when the script calls it."""
    kv = kv_factory("--lua-time-limit", "200")
    t0 = time.time()
    out = session(kv.port, START + [("e", "while true do end"), ("e", "1+1"), ("c",)])
    assert out[2] == (b"*1\r\n+<error> timeout reached running the debugger's eval (200 ms), "
                      b"infinite loop?\r\n"), out
    assert out[3] == b"*1\r\n+<retval> 2\r\n"
    out = session(kv.port, [SYNC, ("eval", "local x = 1\nreturn KEYS.f()", "0"),
                            ("e", "KEYS.f = function() while true do end end"), ("c",)])
    assert b"-ERR timeout reached running code outside the script (ldb_eval)" in out[-1], out
    assert time.time() - t0 < 8
    assert kv.client().ping()


def _read_all(s: socket.socket, until: bytes, limit: float = 30) -> bytes:
    s.settimeout(limit)
    data = bytearray()
    deadline = time.time() + limit
    while time.time() < deadline:
        d = s.recv(1 << 20)
        if not d:
            break
        data += d
        if data.endswith(until):
            break
    return bytes(data)


def test_ldb_print_self_referencing_table_is_bounded(kv):
    """A table holding itself 60 times is 60^10 long: Redis renders all of it
    (twice over at every level) and never answers; here the text is cut at
    maxlen, or at 32 MiB with maxlen 0, and comes back at once."""
    script = "local t = {}\nfor i=1,60 do t[i]=t end\nredis.debug(t)\nreturn 1"
    with socket.create_connection(("127.0.0.1", kv.port)) as s:
        for step in [SYNC, ("eval", script, "0"), ("b", "3"), ("c",)]:
            s.sendall(enc(*step))
            read_reply(s)
        t0 = time.time()
        s.sendall(enc("p", "t"))
        got = read_reply(s)
        assert got.startswith(b"*2\r\n+<value> {{{{{{{{{{<max recursion level reached!"), got[:200]
        assert len(got) < 500 and b" ...\r\n+<hint>" in got
        s.sendall(enc("m", "0"))
        read_reply(s)
        s.sendall(enc("p", "t"))
        got = _read_all(s, b" ...\r\n")
        assert 32 << 20 < len(got) < (32 << 20) + 100, len(got)
        s.sendall(enc("c",))  # redis.debug(t): cut the same way
        got = _read_all(s, b"<EOF>")
        assert b"<debug> line 3: {{{{" in got[:100] and 32 << 20 < len(got) < (32 << 20) + 200
        assert time.time() - t0 < 20
    assert kv.client().ping()


def _listening_inodes(port: int) -> set[str]:
    found = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(name) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    found.add(cols[9])
    return found


def _socket_inodes(pid: int) -> set[str]:
    out = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            out.add(link[8:-1])
    return out


def test_ldb_forked_child_closes_listening_sockets(kv):
    """As Redis's: the debugging child holds no listening socket, so a server
    that dies (or restarts on the port) leaves none that accepts connections
    no one serves."""
    s = socket.create_connection(("127.0.0.1", kv.port))
    s.sendall(enc("script", "debug", "yes"))
    assert read_reply(s) == b"+OK\r\n"
    s.sendall(enc("eval", "local x = 1\nreturn x", "0"))
    assert b"Stopped at 1" in read_reply(s)
    kids = subprocess.run(["pgrep", "-P", str(kv.proc.pid)], capture_output=True,
                          text=True).stdout.split()
    assert kids
    listening = _listening_inodes(kv.port)
    assert listening & _socket_inodes(kv.proc.pid)
    for kid in kids:
        assert not listening & _socket_inodes(int(kid)), "the child holds a listening socket"
    s.sendall(enc("c",))
    assert read_reply(s).endswith(b"<EOF>")
    s.close()


def test_ldb_forked_child_writes_reach_no_aof(kv_factory, tmp_path):
    """The child's dataset changes are thrown away: none reaches the AOF
    (the parent's file, shared by the fork)."""
    kv = kv_factory("--appendonly", "yes", "--appendfsync", "always")
    c = kv.client()
    c.set("before", "1")
    out = session(kv.port, [("script", "debug", "yes"),
                            ("eval", "redis.call('set','childkey','x')\nreturn 1", "0"), ("c",)])
    assert out[-1].endswith(b":1\r\n<EOF>")
    c.set("after", "1")
    data = b"".join(p.read_bytes() for p in (tmp_path / "appendonlydir").iterdir())
    assert b"before" in data and b"after" in data and b"childkey" not in data
    assert c.get("childkey") is None


# ---- the multi-part AOF manifest ----

INCR = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n1\r\n"


def _start_or_stop(binary: str, d: Path, timeout: float = 8.0):
    """Starts binary on d (appendonly yes): ("exit", code, log) if it stops
    by itself, else ("up", dbsize, k, files after a BGREWRITEAOF)."""
    import redis
    port = free_port()
    with open(d / "log", "wb") as log:
        p = subprocess.Popen([binary, "--port", str(port), "--dir", str(d), "--save", "",
                              "--appendonly", "yes"], cwd=d, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if p.poll() is not None:
                return ("exit", p.returncode, (d / "log").read_text(errors="replace"))
            try:
                c = redis.Redis(port=port, socket_timeout=5)
                c.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        else:
            raise AssertionError(f"{binary} neither started nor stopped")
        state = (c.dbsize(), c.get("k"))
        c.bgrewriteaof()
        while c.info("persistence")["aof_rewrite_in_progress"] or \
                c.info("persistence")["aof_rewrite_scheduled"]:
            time.sleep(0.05)
        time.sleep(0.2)
        return ("up", *state, sorted(os.listdir(d / "appendonlydir")),
                (d / "appendonlydir" / "appendonly.aof.manifest").read_text())
    finally:
        if p.poll() is None:
            p.terminate()
            p.wait(10)


def _both(tmp_path: Path, setup):
    out = []
    for name, binary in (("redis", REDIS_SERVER), ("kv", KV_BIN)):
        d = tmp_path / name
        (d / "appendonlydir").mkdir(parents=True)
        setup(d / "appendonlydir")
        out.append(_start_or_stop(binary, d))
    return out


def _manifest(text: bytes, **files: bytes):
    def setup(a: Path):
        (a / "appendonly.aof.manifest").write_bytes(text)
        for name, data in files.items():
            (a / name.replace("_", ".")).write_bytes(data)
    return setup


@pytest.mark.parametrize("setup", [
    pytest.param(lambda a: os.mkfifo(a / "appendonly.aof.manifest"), id="fifo"),
    pytest.param(lambda a: (a / "appendonly.aof.manifest").mkdir(), id="directory"),
])
def test_manifest_not_a_regular_file_as_redis(tmp_path, setup):
    """Redis takes a manifest that is not a regular file for none: a FIFO is
    replaced by a new manifest (brisk-kv blocked opening it, then failed); a
    directory stops both where the new manifest cannot take its place."""
    theirs, mine = _both(tmp_path, setup)
    if theirs[0] == "exit":
        msg = ("Error trying to rename the temporary AOF manifest file "
               "temp-appendonly.aof.manifest into appendonly.aof.manifest: Is a directory")
        assert theirs[1] == 1 and msg in theirs[2], theirs
        assert mine[0] == "exit" and mine[1] == 1 and msg in mine[2], mine
    else:
        assert mine == theirs


@pytest.mark.parametrize("setup", [
    # 2^63 saturates; the next incr file's number wraps, as Redis's
    pytest.param(_manifest(b"file appendonly.aof.1.incr.aof seq 9223372036854775808 type i\n",
                           appendonly_aof_1_incr_aof=INCR), id="incr-seq-2^63"),
    pytest.param(_manifest(b"file appendonly.aof.1.base.aof seq 9223372036854775807 type b\n",
                           appendonly_aof_1_base_aof=INCR), id="base-seq-max"),
    # a NUL in a quoted name ends it; control bytes in the name
    pytest.param(_manifest(b'file "appendonly.aof.1.incr.aof\\x00zz" seq 1 type i\n',
                           appendonly_aof_1_incr_aof=INCR), id="nul-in-name"),
    # thousands of history lines (missing files: not needed to load)
    pytest.param(_manifest(b"".join(b"file h%d seq %d type h\n" % (i, i) for i in range(1, 5000))
                           + b"file appendonly.aof.1.incr.aof seq 1 type i\n",
                           appendonly_aof_1_incr_aof=INCR), id="5000-history-lines"),
    # the same incr file twice: replayed twice, as Redis
    pytest.param(_manifest(b"file x.aof seq 1 type i\nfile x.aof seq 2 type i\n",
                           x_aof=INCR), id="duplicate-names"),
])
def test_extreme_manifest_loads_as_redis(tmp_path, setup):
    theirs, mine = _both(tmp_path, setup)
    assert theirs[0] == "up", theirs
    assert mine == theirs


@pytest.mark.parametrize("setup,msg", [
    pytest.param(_manifest(b"file appendonly.aof.1.incr.aof seq -1 type i\n",
                           appendonly_aof_1_incr_aof=INCR),
                 "Found a non-monotonic sequence number", id="incr-seq-minus-1"),
    pytest.param(_manifest(b"file x.aof\0 seq 1 type i\n", x_aof=INCR),
                 "The AOF manifest file contains too long line", id="nul-byte"),
    pytest.param(_manifest(b"#" + b"x" * 3000 + b"\nfile x.aof seq 1 type i\n", x_aof=INCR),
                 "The AOF manifest file contains too long line", id="long-comment"),
    pytest.param(_manifest(b"file .. seq 1 type i\n"),
                 "Unrecoverable error reading the append only file ..: Is a directory",
                 id="dot-dot"),
    pytest.param(_manifest(b'file "" seq 1 type i\n'),
                 "Unrecoverable error reading the append only file : Is a directory",
                 id="empty-name"),
])
def test_hostile_manifest_stops_as_redis(tmp_path, setup, msg):
    theirs, mine = _both(tmp_path, setup)
    assert theirs[:2] == ("exit", 1) and msg in theirs[2], theirs
    assert mine[:2] == ("exit", 1) and msg in mine[2], mine


# ---- refusals logged as Redis's (appended: replica, OOM) ----

def test_ldb_write_refused_on_replica_as_redis(kv_factory, tmp_path):
    """A write a read-only replica refuses never ran: Redis logs its shared
    error as it is ("-READONLY ...\\r\\n") and no <reply> line."""
    from kvlib import start_redis, stop_redis
    dead = free_port()  # a master that is not there: still a read-only replica
    kv = kv_factory("--replicaof", "127.0.0.1", str(dead))
    (tmp_path / "ref").mkdir()
    proc, ref = start_redis(tmp_path / "ref", "--replicaof", "127.0.0.1", str(dead))
    try:
        for steps in (
            [SYNC, ("eval", "redis.call('set','x','1')\nreturn 1", "0"), ("s",), ("c",)],
            [SYNC, ("eval", "return 1", "0"), ("r", "set", "a", "b"), ("r", "get", "a"), ("c",)],
        ):
            same(session(kv.port, steps), session(port_of(ref), steps), steps)
    finally:
        stop_redis(proc, ref)


def test_ldb_oom_refusal_as_redis(kv, reference):
    steps = [("set", "pad", "x" * 1000), ("config", "set", "maxmemory", "1"), SYNC,
             ("eval", "local x = redis.pcall('set','a','b')\nreturn 1", "0"), ("s",),
             ("r", "set", "a", "b"), ("r", "get", "a"), ("c",)]
    same(session(kv.port, steps), session(port_of(reference), steps), steps)
