"""Stream keyspace notifications and XREAD/XREADGROUP key extraction, side
by side with a real redis-server 7: the same commands on both, the events
each publishes (channel and message, in order) compared one command at a
time; COMMAND GETKEYS / GETKEYSANDFLAGS and the ACL key check compared
byte for byte."""
from __future__ import annotations

import time

import pytest

from kv_sidebyside import Raw, both, pair, same  # noqa: F401  (pair is a fixture)

# Every stream command that changes something, and some that do not (a
# failed or empty XTRIM/XDEL, an existing consumer, a second DESTROY):
# those publish nothing in Redis either.
SCRIPT = [
    ("XADD", "s", "1-1", "f", "v"),
    ("XADD", "s", "2-1", "f", "v", "g", "w"),
    ("XADD", "s", "MAXLEN", "1", "3-1", "f", "v"),
    ("XADD", "s2", "NOMKSTREAM", "*", "f", "v"),
    ("XADD", "s", "1-1", "f", "v"),
    ("XTRIM", "s", "MAXLEN", "0"),
    ("XTRIM", "s", "MAXLEN", "0"),
    ("XADD", "s", "4-1", "f", "v"),
    ("XADD", "s", "5-1", "f", "v"),
    ("XDEL", "s", "4-1", "99-1"),
    ("XDEL", "s", "99-1"),
    ("XGROUP", "CREATE", "s", "g", "$"),
    ("XGROUP", "CREATE", "s", "g", "$"),
    ("XGROUP", "CREATE", "s3", "g", "$", "MKSTREAM"),
    ("XGROUP", "CREATE", "nokey", "g", "$"),
    ("XGROUP", "CREATECONSUMER", "s", "g", "c"),
    ("XGROUP", "CREATECONSUMER", "s", "g", "c"),
    ("XREADGROUP", "GROUP", "g", "c2", "STREAMS", "s", "0"),
    ("XREADGROUP", "GROUP", "g", "c3", "STREAMS", "s", ">"),
    ("XADD", "s", "6-1", "f", "v"),
    ("XREADGROUP", "GROUP", "g", "c4", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "c4", "NOACK", "STREAMS", "s", ">"),
    ("XCLAIM", "s", "g", "c5", "0", "6-1"),
    ("XCLAIM", "s", "g", "c5", "0", "6-1"),
    ("XAUTOCLAIM", "s", "g", "c6", "0", "0"),
    ("XACK", "s", "g", "6-1"),
    ("XGROUP", "DELCONSUMER", "s", "g", "c"),
    ("XGROUP", "DELCONSUMER", "s", "g", "nope"),
    ("XGROUP", "SETID", "s", "g", "0"),
    ("XGROUP", "SETID", "s", "g", "$", "ENTRIESREAD", "3"),
    ("XSETID", "s", "100-1"),
    ("XSETID", "s", "100-1"),
    ("XSETID", "s", "1-1"),
    ("XGROUP", "DESTROY", "s", "g"),
    ("XGROUP", "DESTROY", "s", "g"),
    ("XADD", "s", "MINID", "200", "200-1", "f", "v"),
    ("XADD", "s", "MAXLEN", "~", "0", "201-1", "f", "v"),
    ("XTRIM", "s", "MINID", "300"),
    ("DEL", "s"),
    ("XADD", "big", "*", "f", "v"),
    ("COPY", "big", "big2"),
    ("RENAME", "big2", "big3"),
]


def _events(sub: Raw) -> list[bytes]:
    """Drains what the subscriber got: publishes end with a PING's pong."""
    sub.s.sendall(b"*2\r\n$4\r\nPING\r\n$4\r\nmark\r\n")
    out = []
    while True:
        m = sub.read_reply()
        if b"mark" in m and m.startswith(b"*2\r\n$4\r\npong"):
            return out
        out.append(m)




def _send(c: Raw, *args: str) -> None:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a.encode()))
    c.s.sendall(b"".join(out))


def _subscriber(port: int, flags: str) -> tuple[Raw, Raw]:
    cmd = Raw(port)
    assert cmd.call("CONFIG", "SET", "notify-keyspace-events", flags) == b"+OK\r\n"
    sub = Raw(port)
    sub.call("PSUBSCRIBE", "__key*__:*")
    return cmd, sub


@pytest.mark.parametrize("flags", ["KEA", "KEAn", "Et", "Kt", "Eg"])
def test_stream_events_match_redis(pair, flags):
    b, r = pair[0], pair[1]
    bc, bs = _subscriber(b.s.getpeername()[1], flags)
    rc, rs = _subscriber(r.s.getpeername()[1], flags)
    for cmd in SCRIPT:
        want = rc.call(*cmd)
        got = bc.call(*cmd)
        if cmd[0] != "XADD" or "*" not in cmd:  # '*' IDs differ by clock
            assert got == want, f"{cmd}: redis {want!r} brisk {got!r}"
        we, ge = _events(rs), _events(bs)
        assert ge == we, f"{flags} {cmd}: redis {we!r} brisk {ge!r}"
    for c in (bc, bs, rc, rs):
        c.close()


def test_blocked_xreadgroup_served_creates_consumer_event(pair):
    """A blocked XREADGROUP served by an XADD creates its consumer then:
    Redis publishes xadd, then xgroup-createconsumer."""
    b, r = pair[0], pair[1]
    results = []
    for p in (b, r):
        port = p.s.getpeername()[1]
        cmd, sub = _subscriber(port, "KEA")
        cmd.call("XGROUP", "CREATE", "q", "g", "$", "MKSTREAM")
        _events(sub)
        waiter = Raw(port)
        _send(waiter, "XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0", "STREAMS", "q", ">")
        deadline = time.time() + 5
        while b"blocked_clients:1" not in cmd.call("INFO", "clients"):
            assert time.time() < deadline
            time.sleep(0.01)
        cmd.call("XADD", "q", "1-1", "f", "v")
        first = waiter.read_reply()
        # a second waiter: alice exists now, no event
        _send(waiter, "XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0", "STREAMS", "q", ">")
        while b"blocked_clients:1" not in cmd.call("INFO", "clients"):
            assert time.time() < deadline
            time.sleep(0.01)
        cmd.call("XADD", "q", "2-1", "f", "v")
        second = waiter.read_reply()
        results.append((first, second, _events(sub)))
        for c in (cmd, sub, waiter):
            c.close()
    assert results[0] == results[1]
    events = b"".join(results[1][2])
    assert events.count(b"xgroup-createconsumer") == 2  # keyspace + keyevent, once


GETKEYS = [
    ("XREAD", "STREAMS", "a", "0"),
    ("XREAD", "streams", "a", "b", "0", "0"),
    ("XREAD", "COUNT", "2", "BLOCK", "0", "STREAMS", "a", "b", "c", "0", "0", "0"),
    ("XREAD", "STREAMS", "a", "b", "0"),
    ("XREAD", "STREAMS", "a", "b", "c", "0"),
    ("XREAD", "STREAMS", "STREAMS", "STREAMS", "0", "0"),
    ("XREAD", "COUNT", "STREAMS", "STREAMS", "a", "0"),
    ("XREAD", "foo", "bar", "STREAMS", "a", "0"),
    ("XREAD", "COUNT", "1", "a", "b"),
    ("XREAD", "a", "b", "STREAMS"),
    ("XREAD", "a", "b", "c", "STREAMS", "d"),
    ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "a", ">"),
    ("XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "BLOCK", "0", "NOACK", "STREAMS", "a", "b",
     ">", ">"),
    ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "a", "b", ">"),
    ("XREADGROUP", "GROUP", "streams", "c", "STREAMS", "a", ">"),
    ("XREADGROUP", "GROUP", "g", "streams", "STREAMS", "a", ">"),
    ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "STREAMS", "STREAMS", ">", ">"),
    ("XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "a"),
    ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "a"),
    ("XREAD", "STREAMS"),
    ("XADD", "s", "*", "f", "v"),
    ("XGROUP", "CREATE", "s", "g", "$"),
    ("XGROUP", "CREATECONSUMER", "s", "g", "c"),
    ("XINFO", "STREAM", "s"),
    ("XACK", "s", "g", "1-1"),
    ("XAUTOCLAIM", "s", "g", "c", "0", "0"),
    ("XCLAIM", "s", "g", "c", "0", "1-1"),
    ("XPENDING", "s", "g"),
    ("XSETID", "s", "1-1"),
    ("XTRIM", "s", "MAXLEN", "1"),
]


@pytest.mark.parametrize("cmd", GETKEYS, ids=lambda c: " ".join(c))
def test_getkeys_match_redis(pair, cmd):
    same(pair, "COMMAND", "GETKEYS", *cmd)
    same(pair, "COMMAND", "GETKEYSANDFLAGS", *cmd)


def test_acl_xreadgroup_key_search_starts_after_group(pair):
    """The STREAMS keyword is searched from argument 4 of XREADGROUP: a group
    or consumer named "streams" is not where the keys start."""
    for p in (pair[0], pair[1]):
        p.call("XADD", "a1", "1-1", "f", "v")
        p.call("XGROUP", "CREATE", "a1", "streams", "0")
        p.call("ACL", "SETUSER", "u", "on", "nopass", "~a*", "+@all")
        p.call("AUTH", "u", "x")
    both(pair, "XREADGROUP", "GROUP", "streams", "c", "STREAMS", "a1", ">")
    both(pair, "XREADGROUP", "GROUP", "streams", "b1", "STREAMS", "a1", "0")
