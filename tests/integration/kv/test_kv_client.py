"""CLIENT subcommands, client-side caching (CLIENT TRACKING), CLIENT PAUSE,
CLIENT REPLY and MONITOR, each compared with a real redis-server 7 where
the bytes can be compared (ids and timestamps aside)."""
from __future__ import annotations

import re
import socket
import time

import pytest
import redis


class Raw:
    """A raw RESP connection: exact bytes, push messages and silence."""

    def __init__(self, port: int):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buf = b""

    def send(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)

    def _fill(self):
        chunk = self.s.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        self.buf += chunk

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def read(self):
        """One reply, as a (type, value) tree with the raw type byte kept."""
        line = self._line()
        t, rest = line[:1], line[1:]
        if t in b"+-:,#(":
            return (t, rest)
        if t == b"_":
            return (t, None)
        if t in b"$=":
            n = int(rest)
            if n < 0:
                return (t, None)
            while len(self.buf) < n + 2:
                self._fill()
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return (t, data)
        if t in b"*>~%":
            n = int(rest)
            if n < 0:
                return (t, None)
            n = n * 2 if t == b"%" else n
            return (t, [self.read() for _ in range(n)])
        raise AssertionError(f"bad reply type {line!r}")

    def cmd(self, *args):
        self.send(*args)
        return self.read()

    def silent(self, wait: float = 0.3) -> bool:
        """Whether nothing arrives within wait seconds."""
        if self.buf:
            return False
        self.s.settimeout(wait)
        try:
            data = self.s.recv(65536)
        except socket.timeout:
            return True
        finally:
            self.s.settimeout(5)
        self.buf += data
        return not data

    def close(self):
        self.s.close()


def ref_port(reference) -> int:
    return reference.connection_pool.connection_kwargs["port"]


def both(kv, reference):
    return kv.port, ref_port(reference)


def err_or_value(c, *args):
    try:
        return ("ok", c.execute_command(*args))
    except redis.ResponseError as e:
        return ("err", str(e))


# ---- CLIENT errors and simple replies, side by side ----

SAME_REPLIES = [
    ("CLIENT", "REPLY"), ("CLIENT", "REPLY", "foo"), ("CLIENT", "REPLY", "on", "x"),
    ("CLIENT", "TRACKING"), ("CLIENT", "TRACKING", "foo"),
    ("CLIENT", "TRACKING", "on", "redirect", "999999"),
    ("CLIENT", "TRACKING", "on", "redirect", "abc"),
    ("CLIENT", "TRACKING", "on", "redirect", "-9223372036854775808"),
    ("CLIENT", "TRACKING", "on", "redirect", "0"),
    ("CLIENT", "TRACKING", "on", "prefix", "a"),
    ("CLIENT", "TRACKING", "on", "optin", "optout"),
    ("CLIENT", "TRACKING", "on", "bcast", "optin"),
    ("CLIENT", "TRACKING", "on", "bcast", "prefix", "a", "prefix", "ab"),
    ("CLIENT", "TRACKING", "on", "bcast", "prefix", "ab", "prefix", "a"),
    ("CLIENT", "TRACKING", "off", "prefix", "a"),
    ("CLIENT", "CACHING", "yes"), ("CLIENT", "CACHING", "foo"), ("CLIENT", "CACHING"),
    ("CLIENT", "GETREDIR"), ("CLIENT", "GETREDIR", "x"), ("CLIENT", "TRACKINGINFO"),
    ("CLIENT", "PAUSE"), ("CLIENT", "PAUSE", "abc"), ("CLIENT", "PAUSE", "-1"),
    ("CLIENT", "PAUSE", "-9223372036854775808"), ("CLIENT", "PAUSE", "10", "foo"),
    ("CLIENT", "PAUSE", "10", "write", "x"), ("CLIENT", "UNPAUSE", "x"), ("CLIENT", "UNPAUSE"),
    ("CLIENT", "NO-EVICT"), ("CLIENT", "NO-EVICT", "maybe"), ("CLIENT", "NO-EVICT", "on"),
    ("CLIENT", "NO-EVICT", "off"),
    ("CLIENT", "KILL"), ("CLIENT", "KILL", "1.2.3.4:5"), ("CLIENT", "KILL", "maxage", "5"),
    ("CLIENT", "KILL", "id", "abc"), ("CLIENT", "KILL", "id", "0"),
    ("CLIENT", "KILL", "id", "-9223372036854775808"),
    ("CLIENT", "KILL", "id", "9223372036854775807"),
    ("CLIENT", "KILL", "id", "18446744073709551616"),
    ("CLIENT", "KILL", "id", "10", "wrong_arg"), ("CLIENT", "KILL", "type", "wrong"),
    ("CLIENT", "KILL", "type", "pubsub"), ("CLIENT", "KILL", "user", "nobody"),
    ("CLIENT", "KILL", "user", "default"), ("CLIENT", "KILL", "skipme", "maybe"),
    ("CLIENT", "KILL", "laddr", "x"), ("CLIENT", "KILL", "addr", "x", "skipme", "no"),
    ("CLIENT", "LIST", "type", "x"), ("CLIENT", "LIST", "id"), ("CLIENT", "LIST", "id", "0"),
    ("CLIENT", "LIST", "id", "abc"), ("CLIENT", "LIST", "id", "1", "abc"),
    ("CLIENT", "LIST", "id", "9223372036854775807"), ("CLIENT", "LIST", "foo"),
    ("CLIENT", "LIST", "type", "pubsub"), ("CLIENT", "LIST", "type", "master"),
    ("CLIENT", "LIST", "type", "normal", "type", "pubsub"),
    ("CLIENT", "SETNAME"), ("CLIENT", "SETNAME", "a b"), ("CLIENT", "SETNAME", "a\nb"),
    ("CLIENT", "SETNAME", "ok-name"), ("CLIENT", "GETNAME"), ("CLIENT", "SETNAME", ""),
    ("CLIENT", "GETNAME"), ("CLIENT", "GETNAME", "x"), ("CLIENT", "ID", "x"),
    ("CLIENT", "INFO", "x"), ("CLIENT", "foo"), ("CLIENT",), ("CLIENT", "HELP"),
    ("CLIENT", "HELP", "x"),
]


def test_client_replies_match_reference(kv, reference):
    c = kv.client()
    for args in SAME_REPLIES:
        assert err_or_value(c, *args) == err_or_value(reference, *args), args
    c.close()


def test_tracking_mode_switch_errors_match_reference(kv, reference):
    seq = [("CLIENT", "TRACKING", "on", "optin"), ("CLIENT", "CACHING", "no"),
           ("CLIENT", "TRACKING", "on", "optout"), ("CLIENT", "TRACKING", "on", "bcast"),
           ("CLIENT", "TRACKINGINFO"), ("CLIENT", "CACHING", "yes"), ("CLIENT", "TRACKINGINFO"),
           ("CLIENT", "GETREDIR"), ("CLIENT", "TRACKING", "off"),
           ("CLIENT", "TRACKING", "on", "optout"), ("CLIENT", "CACHING", "yes"),
           ("CLIENT", "CACHING", "no"), ("CLIENT", "TRACKINGINFO"), ("CLIENT", "TRACKING", "off"),
           ("CLIENT", "TRACKING", "on", "bcast", "prefix", "ab"),
           ("CLIENT", "TRACKING", "on", "bcast", "prefix", "a"),
           ("CLIENT", "TRACKING", "on", "bcast", "prefix", "abc"),
           ("CLIENT", "TRACKING", "on", "bcast", "prefix", "ab"),
           ("CLIENT", "TRACKING", "on", "bcast", "prefix", "xy", "noloop"),
           ("CLIENT", "TRACKING", "on"), ("CLIENT", "TRACKINGINFO"),
           ("CLIENT", "TRACKING", "off"), ("CLIENT", "TRACKINGINFO"), ("CLIENT", "GETREDIR")]
    a, b = Raw(kv.port), Raw(ref_port(reference))
    for resp in ("2", "3"):
        a.cmd("HELLO", resp)
        b.cmd("HELLO", resp)
        for args in seq:
            assert a.cmd(*args) == b.cmd(*args), (resp, args)
    a.close()
    b.close()


# ---- CLIENT REPLY ----

def reply_script(conn: Raw):
    conn.send("CLIENT", "REPLY", "OFF")
    conn.send("PING")
    conn.send("SET", "k", "v")
    conn.send("GET", "k")
    conn.send("NOSUCHCOMMAND")
    conn.send("SET", "k")
    quiet = conn.silent()
    conn.send("CLIENT", "REPLY", "SKIP")  # ignored while OFF
    conn.send("CLIENT", "REPLY", "ON")
    first = conn.read()
    conn.send("CLIENT", "REPLY", "SKIP")
    conn.send("PING", "skipped")
    conn.send("PING", "seen")
    second = conn.read()
    conn.send("CLIENT", "REPLY", "SKIP")
    conn.send("CLIENT", "REPLY", "ON")
    third = conn.read()
    return quiet, first, second, third, conn.silent(0.2)


def test_client_reply_off_is_really_silent(kv, reference):
    """Regression: CLIENT REPLY OFF used to answer +OK and go on replying."""
    a, b = Raw(kv.port), Raw(ref_port(reference))
    got = reply_script(a)
    assert got == reply_script(b)
    assert got[0] is True
    assert got[1:4] == ((b"+", b"OK"), (b"$", b"seen"), (b"+", b"OK"))
    # the write done while silent happened
    assert a.cmd("GET", "k") == (b"$", b"v")
    a.close()
    b.close()


def test_client_reply_off_still_gets_resp3_invalidations(kv, reference):
    for port in both(kv, reference):
        t, w = Raw(port), Raw(port)
        t.cmd("HELLO", "3")
        t.cmd("CLIENT", "TRACKING", "on")
        w.cmd("SET", "foo", "bar")
        assert t.cmd("GET", "foo") == (b"$", b"bar")
        t.send("CLIENT", "REPLY", "OFF")
        assert t.silent()
        w.cmd("SET", "foo", "bar2")
        assert t.read() == (b">", [(b"$", b"invalidate"), (b"*", [(b"$", b"foo")])])
        assert t.cmd("CLIENT", "REPLY", "ON") == (b"+", b"OK")
        assert t.cmd("PING") == (b"+", b"PONG")
        t.close()
        w.close()


# ---- tracking ----

def test_tracking_resp3_push_bytes_equal_reference(kv, reference):
    out = []
    for port in both(kv, reference):
        t, w = Raw(port), Raw(port)
        t.cmd("HELLO", "3")
        t.cmd("CLIENT", "TRACKING", "on")
        w.cmd("MSET", "k1", "1", "k2", "2")
        t.cmd("MGET", "k1", "k2", "k3")
        w.cmd("SET", "k2", "x")
        w.cmd("DEL", "k1")
        w.cmd("SET", "k1", "again")  # k1 no longer tracked: no message
        w.cmd("SET", "k3", "x")
        msgs = [t.read(), t.read(), t.read()]
        assert t.silent(0.2)
        # a key changed by the tracking client itself: message after the reply
        t.cmd("HSET", "h", "f", "1")
        t.cmd("HGET", "h", "f")
        t.send("HDEL", "h", "f")
        msgs += [t.read(), t.read()]
        # FLUSHALL: one null invalidation
        t.cmd("GET", "z")
        w.cmd("FLUSHALL")
        msgs.append(t.read())
        assert t.silent(0.2)
        out.append(msgs)
        t.close()
        w.close()
    assert out[0] == out[1]
    assert out[0][3] == (b":", b"1") and out[0][4][0] == b">"


def test_tracking_redirect_resp2_and_broken(kv, reference):
    out = []
    for port in both(kv, reference):
        rd, t, w = Raw(port), Raw(port), Raw(port)
        rid = int(rd.cmd("CLIENT", "ID")[1])
        rd.cmd("SUBSCRIBE", "__redis__:invalidate")
        assert t.cmd("CLIENT", "TRACKING", "on", "REDIRECT", rid) == (b"+", b"OK")
        t.cmd("SET", "a", "1")
        t.cmd("GET", "a")
        t.cmd("INCR", "a")  # the tracking client's own change is notified too
        msgs = [rd.read()]
        # NOLOOP: its own changes are not
        t.cmd("CLIENT", "TRACKING", "on", "REDIRECT", rid, "NOLOOP")
        t.cmd("MGET", "x", "loop")
        t.cmd("SET", "loop", "1")
        w.cmd("SET", "x", "1")
        msgs.append(rd.read())
        assert rd.silent(0.2)
        info = t.cmd("CLIENT", "TRACKINGINFO")
        # the redirect target leaves: RESP3 client hears "tracking-redir-broken"
        t.cmd("HELLO", "3")
        t.cmd("GET", "b")
        rd.close()
        time.sleep(0.1)
        w.cmd("SET", "b", "2")
        t.send("PING")
        broken = t.read()
        msgs += [broken[0], broken[1][0], t.read(), t.cmd("CLIENT", "TRACKINGINFO")]
        out.append((msgs, info))
        t.close()
        w.close()
    ours, ref = out
    # ids differ between the servers: compare with them blanked
    blank = lambda x: re.sub(rb"(redirect'\), \(b':', b')\d+", rb"\1N", repr(x).encode())
    assert blank(ours[1]) == blank(ref[1])
    assert ours[0][:2] == ref[0][:2]
    assert ours[0][2:4] == ref[0][2:4]
    assert ours[0][4] == ref[0][4]
    assert blank(ours[0][5]) == blank(ref[0][5])


def test_tracking_bcast_prefixes(kv, reference):
    out = []
    for port in both(kv, reference):
        rd, t = Raw(port), Raw(port)
        rid = int(rd.cmd("CLIENT", "ID")[1])
        rd.cmd("SUBSCRIBE", "__redis__:invalidate")
        t.cmd("CLIENT", "TRACKING", "on", "BCAST", "REDIRECT", rid, "PREFIX", "a:", "PREFIX", "b:")
        t.send("MULTI")
        for k in ("a:1", "a:2", "b:1", "c:1"):
            t.send("INCR", k)
        t.send("EXEC")
        for _ in range(6):
            t.read()
        msgs = sorted(repr(rd.read()) for _ in range(2))
        assert rd.silent(0.2)
        out.append(msgs)
        t.close()
        rd.close()
    assert out[0] == out[1]


def test_tracking_info_counters(kv):
    r = kv.client(decode_responses=True)
    t = kv.client(decode_responses=True)
    t.execute_command("CLIENT", "TRACKING", "on")
    t.get("k1")
    t.get("k2")
    info = r.info()
    assert info["tracking_clients"] == 1
    assert info["tracking_total_keys"] == 2
    assert info["tracking_total_items"] == 2
    r.set("k1", "x")
    assert r.info()["tracking_total_keys"] == 1
    r.config_set("tracking-table-max-keys", "0")
    t.close()
    time.sleep(0.1)
    assert r.info()["tracking_clients"] == 0
    r.close()


# ---- CLIENT PAUSE ----

def wait_info(c, field, value, timeout=3.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if c.info()[field] == value:
            return
        time.sleep(0.02)
    raise AssertionError(f"{field} never reached {value}: {c.info()[field]}")


def test_pause_write_holds_writes_not_reads(kv):
    r = kv.client(decode_responses=True)
    r.set("k", "old")
    assert r.execute_command("CLIENT", "PAUSE", "100000", "WRITE") == "OK"
    w = Raw(kv.port)
    w.send("SET", "k", "new")
    w.send("GET", "k")  # behind the held SET on the same connection
    assert w.silent(0.3)
    wait_info(r, "blocked_clients", 1)
    assert r.get("k") == "old"  # reads go on
    ro = Raw(kv.port)
    assert ro.cmd("PING") == (b"+", b"PONG")
    assert ro.cmd("SET", "k") == (b"-", b"ERR wrong number of arguments for 'set' command")
    assert r.execute_command("CLIENT", "UNPAUSE") == "OK"
    assert w.read() == (b"+", b"OK")
    assert w.read() == (b"$", b"new")
    assert r.info()["blocked_clients"] == 0
    w.close()
    ro.close()
    r.close()


def test_pause_all_and_timeout(kv):
    r = kv.client(decode_responses=True)
    w = Raw(kv.port)
    assert r.execute_command("CLIENT", "PAUSE", "300", "ALL") == "OK"
    t0 = time.time()
    w.send("PING")
    assert w.read() == (b"+", b"PONG")
    assert time.time() - t0 >= 0.2  # held until the pause timed out
    w.close()
    r.close()


def test_pause_write_holds_exec_of_write_transaction(kv):
    r = kv.client(decode_responses=True)
    w = Raw(kv.port)
    w.cmd("MULTI")
    assert w.cmd("SET", "k", "v") == (b"+", b"QUEUED")
    r.execute_command("CLIENT", "PAUSE", "100000", "WRITE")
    w.send("EXEC")
    assert w.silent(0.3)
    r.execute_command("CLIENT", "UNPAUSE")
    assert w.read() == (b"*", [(b"+", b"OK")])
    w.close()
    r.close()


def test_pause_hostile_timeouts(kv, reference):
    for args in [("CLIENT", "PAUSE", "9223372036854775807", "WRITE"), ("CLIENT", "UNPAUSE"),
                 ("CLIENT", "PAUSE", "9223372036854775808"),
                 ("CLIENT", "PAUSE", "-9223372036854775808", "ALL")]:
        assert err_or_value(kv.client(), *args) == err_or_value(reference, *args), args
    assert kv.client().ping()


# ---- CLIENT LIST / INFO ----

def fields(line: str):
    return [kv.split("=", 1)[0] for kv in line.strip().split(" ")]


def test_client_list_fields_equal_reference(kv, reference):
    ours = kv.client(decode_responses=True)
    ref = redis.Redis(port=ref_port(reference), decode_responses=True)
    for c in (ours, ref):
        c.execute_command("CLIENT", "SETNAME", "me")
    a = ours.execute_command("CLIENT", "LIST")
    b = ref.execute_command("CLIENT", "LIST")
    # Redis 7.0.15's fields, then 7.2's lib-name and lib-ver
    assert fields(a.splitlines()[0]) == fields(b.splitlines()[0]) + ["lib-name", "lib-ver"]
    mine = ours.execute_command("CLIENT", "INFO")
    theirs = ref.execute_command("CLIENT", "INFO")
    assert fields(mine) == fields(theirs) + ["lib-name", "lib-ver"]
    pick = lambda s, keys: {k: v for k, v in (f.split("=", 1) for f in s.split())
                            if k in keys}
    keys = {"name", "flags", "db", "sub", "psub", "ssub", "multi", "qbuf", "obl", "oll", "omem",
            "events", "cmd", "user", "redir", "resp"}
    assert pick(mine, keys) == pick(theirs, keys)
    # container commands print as container|sub; others plainly
    for c in (ours, ref):
        c.set("x", "1")
    other = kv.client(decode_responses=True)
    listing = other.execute_command("CLIENT", "LIST")
    assert re.search(r"name=me .* cmd=set ", listing)
    assert "cmd=client|list" in listing
    other.close()
    ours.close()
    ref.close()


def test_client_list_type_and_kill(kv):
    r = kv.client(decode_responses=True)
    sub = Raw(kv.port)
    sub.cmd("SUBSCRIBE", "ch")
    lines = r.execute_command("CLIENT", "LIST", "TYPE", "pubsub").splitlines()
    assert len(lines) == 1 and "flags=P" in lines[0] and "sub=1" in lines[0]
    assert len(r.execute_command("CLIENT", "LIST", "TYPE", "normal").splitlines()) == 1
    assert r.execute_command("CLIENT", "KILL", "TYPE", "pubsub") == 1
    with pytest.raises(ConnectionError):
        sub.read()
    sub.close()
    r.close()


# ---- MONITOR ----

LINE = re.compile(rb"^\+\d+\.\d{6} \[(\d+) ([^\]]+)\] (.*)$")


def monitor_lines(port):
    m, c = Raw(port), Raw(port)
    assert m.cmd("MONITOR") == (b"+", b"OK")
    c.cmd("SET", 'k\x01"\\\n\xff', "v a")
    c.cmd("AUTH", "x")
    c.cmd("AUTH", "u", "p")
    c.cmd("HELLO", "2", "AUTH", "u", "p")
    c.cmd("CONFIG", "GET", "x")      # admin: not shown
    c.cmd("CONFIG", "HELP")          # not admin: shown
    c.cmd("NOSUCHCOMMAND")           # rejected: not shown
    c.cmd("GET")                     # rejected: not shown
    c.cmd("CLIENT", "LIST")          # admin subcommand: not shown
    c.cmd("CLIENT", "ID")
    c.cmd("SELECT", "3")
    c.cmd("MULTI")
    c.cmd("SET", "a", "1")
    c.cmd("EXEC")
    c.cmd("MONITOR")                 # admin
    c.close()
    time.sleep(0.1)
    out = []
    m.s.settimeout(0.5)
    try:
        while True:
            out.append(m._line())
    except (socket.timeout, ConnectionError):
        pass
    m.close()
    return out


def test_monitor_lines_match_reference(kv, reference):
    ours, ref = monitor_lines(kv.port), monitor_lines(ref_port(reference))
    strip = lambda lines: [(LINE.match(l).group(1), LINE.match(l).group(3)) for l in lines]
    assert all(LINE.match(l) for l in ours), ours
    assert strip(ours) == strip(ref)
    assert b'"SET" "k\\x01\\"\\\\\\n\\xc3\\xbf" "v a"' in ours[0]
    assert LINE.match(ours[0]).group(2).startswith(b"127.0.0.1:")


def test_reset_clears_client_modes(kv):
    t = Raw(kv.port)
    t.cmd("CLIENT", "TRACKING", "on")
    t.cmd("MONITOR")
    assert t.cmd("RESET") == (b"+", b"RESET")
    assert t.cmd("CLIENT", "GETREDIR") == (b":", b"-1")
    r = kv.client()
    r.set("x", "1")
    assert t.cmd("PING") == (b"+", b"PONG")  # no MONITOR line in between
    t.close()
    r.close()


def test_tracking_only_written_keys_are_invalidated(kv, reference):
    """SINTERSTORE dst src: only dst changes; COPY src dst: only dst;
    SWAPDB sends nothing -- as Redis."""
    out = []
    for port in both(kv, reference):
        t, w = Raw(port), Raw(port)
        t.cmd("HELLO", "3")
        t.cmd("CLIENT", "TRACKING", "on")
        w.cmd("SADD", "a", "1")
        w.cmd("SET", "s", "1")
        for k in ("a", "s", "d", "c"):
            t.cmd("TYPE", k) if k != "a" else t.cmd("SMEMBERS", "a")
            t.cmd("GET", k) if k != "a" else None
        w.cmd("SINTERSTORE", "d", "a", "a")
        w.cmd("COPY", "s", "c")
        w.cmd("SWAPDB", "0", "1")
        w.cmd("SWAPDB", "0", "1")
        w.cmd("SET", "s", "2")
        got = [t.read(), t.read(), t.read()]
        assert t.silent(0.2)
        out.append(got)
        t.close()
        w.close()
    assert out[0] == out[1]


def test_tracking_many_prefixes_stay_fast(kv):
    """100k BCAST prefixes in one command: no quadratic work, and a
    collision among them is an error found at once."""
    c = kv.client(socket_timeout=10)
    many = ["p%06d:" % i for i in range(100000)]
    args = ["CLIENT", "TRACKING", "on", "BCAST"]
    for p in many:
        args += ["PREFIX", p]
    t0 = time.time()
    with pytest.raises(redis.ResponseError, match="overlaps with another provided prefix"):
        c.execute_command(*(args + ["PREFIX", "p"]))
    assert c.execute_command(*args) == b"OK"
    assert time.time() - t0 < 5
    info = c.execute_command("CLIENT", "TRACKINGINFO")
    info = dict(zip(info[::2], info[1::2]))
    assert len(info[b"prefixes"]) == 100000
    w = kv.client()
    t0 = time.time()
    for i in range(2000):
        w.set("q%d" % i, "x")
    assert time.time() - t0 < 5
    assert c.execute_command("CLIENT", "TRACKING", "off") == b"OK"
    assert kv.client().info()["tracking_total_prefixes"] == 0
    c.close()
    w.close()


def test_client_list_flags_match_reference(kv, reference):
    out = []
    for port in both(kv, reference):
        a, b = Raw(port), Raw(port)
        a.cmd("HELLO", "3")
        a.cmd("SUBSCRIBE", "ch")
        a.cmd("CLIENT", "NO-EVICT", "on")
        a.cmd("MULTI")
        bid = int(b.cmd("CLIENT", "ID")[1])
        b.cmd("CLIENT", "TRACKING", "on", "BCAST", "REDIRECT", bid)
        b.cmd("WATCH", "k")
        Raw(port).cmd("SET", "k", "1")
        listing = b.cmd("CLIENT", "LIST")[1].decode()
        out.append(sorted(f for f in re.findall(r"flags=(\S+)", listing) if f != "N"))
        a.close()
        b.close()
    assert out[0] == out[1]


def test_client_list_long_name_is_whole(kv):
    c = kv.client(decode_responses=True)
    name = "n" * 20000
    assert c.execute_command("CLIENT", "SETNAME", name) == "OK"
    assert c.execute_command("CLIENT", "GETNAME") == name
    info = c.execute_command("CLIENT", "INFO")
    assert f" name={name} age=" in info and info.endswith("\n") and " lib-ver=" in info
    assert c.execute_command("CLIENT", "SETINFO", "LIB-NAME", "x" * 5000) == "OK"
    assert ("lib-name=" + "x" * 5000 + " lib-ver=") in c.execute_command("CLIENT", "LIST")
    c.close()


def test_pause_held_clients_that_leave_or_are_killed(kv):
    r = kv.client(decode_responses=True)
    r.execute_command("CLIENT", "PAUSE", "100000", "WRITE")
    gone, killed, stays = Raw(kv.port), Raw(kv.port), Raw(kv.port)
    kid = int(killed.cmd("CLIENT", "ID")[1])
    for c in (gone, killed, stays):
        c.send("INCR", "n")
    wait_info(r, "blocked_clients", 3)
    gone.close()
    assert r.execute_command("CLIENT", "KILL", "ID", kid) == 1
    wait_info(r, "blocked_clients", 1)
    r.execute_command("CLIENT", "UNPAUSE")
    assert stays.read() == (b":", b"1")
    assert r.get("n") == "1"
    stays.close()
    killed.close()
    r.close()
