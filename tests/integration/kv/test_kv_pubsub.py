"""Pub/Sub: SUBSCRIBE, PSUBSCRIBE, UNSUBSCRIBE, PUNSUBSCRIBE, PUBLISH and
PUBSUB, over RESP2 (arrays, the restricted subscribed state) and RESP3
(push messages). The raw byte streams are compared with a real
redis-server's for the same scripted session; redis-py's PubSub and the
clean-up on disconnect are checked against brisk-kv alone.
"""
from __future__ import annotations

import socket
import time

import pytest



class Conn:
    """A raw RESP connection: send a command, collect what arrives."""

    def __init__(self, port: int):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)

    def cmd(self, *args: str | bytes, expect: bool = True) -> bytes:
        """Sends args (if any); returns what arrives: waits up to 5 s for the
        first bytes when a reply is expected, then until 50 ms of silence."""
        if args:
            out = b"*%d\r\n" % len(args)
            for a in args:
                a = a.encode() if isinstance(a, str) else a
                out += b"$%d\r\n%s\r\n" % (len(a), a)
            self.s.sendall(out)
        if not expect:
            return self.read(0.2)
        return self.read(0.05, first=5.0)

    def read(self, wait: float = 0.15, first: float | None = None) -> bytes:
        got = b""
        self.s.settimeout(first or wait)
        while True:
            try:
                b = self.s.recv(65536)
            except socket.timeout:
                return got
            if not b:
                return got + b"<closed>"
            got += b
            self.s.settimeout(wait)

    def read_exact(self, n: int) -> bytes:
        got = b""
        self.s.settimeout(5)
        while len(got) < n:
            b = self.s.recv(n - len(got))
            if not b:
                break
            got += b
        return got

    def close(self):
        self.s.close()


def script(port: int) -> list[bytes]:
    """One scripted session; returns everything each step produced."""
    a, b, c3, d = Conn(port), Conn(port), Conn(port), Conn(port)
    out = []
    steps = [
        (a, ("SUBSCRIBE", "news", "sport")),
        (a, ("SUBSCRIBE", "news")),
        (a, ("PSUBSCRIBE", "n*", "s?ort")),
        (b, ("PUBLISH", "news", "hello")),
        (a, ()),
        (b, ("PUBLISH", "sport", "goal")),
        (a, ()),
        (b, ("PUBLISH", "nobody", "x")),
        (a, None),  # nothing arrives
        (b, ("PUBSUB", "NUMSUB", "news", "sport", "none")),
        (b, ("PUBSUB", "NUMPAT")),
        (b, ("PUBSUB", "CHANNELS", "n*")),
        (b, ("PUBSUB", "CHANNELS", "zzz")),
        (b, ("PUBSUB", "NOPE")),
        (b, ("PUBSUB", "NUMPAT", "extra")),
        (a, ("PING",)),
        (a, ("PING", "there")),
        (a, ("GET", "k")),
        (a, ("SET", "k", "v")),
        (a, ("UNSUBSCRIBE", "sport", "never")),
        (a, ("PUNSUBSCRIBE",)),
        (a, ("UNSUBSCRIBE",)),
        (a, ("UNSUBSCRIBE",)),
        (a, ("PUNSUBSCRIBE", "x*")),
        (a, ("PING",)),
        (a, ("GET", "k")),
        # RESP3: push messages, and every command may run while subscribed
        (c3, ("HELLO", "3")),
        (c3, ("SUBSCRIBE", "news")),
        (c3, ("PSUBSCRIBE", "*")),
        (b, ("PUBLISH", "news", "both")),
        (c3, ()),
        (c3, ("GET", "k")),
        (c3, ("PING",)),
        (c3, ("PUBLISH", "news", "self")),
        (c3, ("UNSUBSCRIBE",)),
        (c3, ("PUNSUBSCRIBE",)),
        (c3, ("RESET",)),
        # back to RESP2 after RESET, no subscriptions left
        (c3, ("PING",)),
        (a, ("SUBSCRIBE", "q")),
        (a, ("QUIT",)),
        (b, ("PUBSUB", "NUMSUB", "q")),
        # inside a transaction
        (d, ("MULTI",)),
        (d, ("SUBSCRIBE", "tx")),
        (d, ("PUBLISH", "tx", "in-tx")),
        (d, ("EXEC",)),
        (b, ("PUBLISH", "tx", "after")),
        (d, ()),
        (d, ("HELLO", "3")),
        (d, ("GET", "k")),
    ]
    for conn, args in steps:
        got = conn.cmd(expect=False) if args is None else conn.cmd(*args)
        if args and args[0] == "HELLO":
            got = got[:1]  # server name and version differ
        out.append(got)
    for conn in (a, b, c3, d):
        conn.close()
    return out


@pytest.fixture
def redis_port(reference):
    return reference.connection_pool.connection_kwargs["port"]


def test_same_bytes_as_redis(kv, redis_port):
    want = script(redis_port)
    got = script(kv.port)
    for i, (w, g) in enumerate(zip(want, got)):
        assert g == w, f"step {i}: redis {w!r}\nbrisk {g!r}"


def test_redis_py_pubsub(kv):
    c = kv.client(decode_responses=True)
    p = c.pubsub()
    p.subscribe("ch")
    p.psubscribe("pat.*")
    assert p.get_message(timeout=2)["type"] == "subscribe"
    assert p.get_message(timeout=2)["type"] == "psubscribe"
    assert c.publish("ch", "one") == 1
    assert c.publish("pat.x", "two") == 1
    assert c.publish("other", "three") == 0
    m1, m2 = p.get_message(timeout=2), p.get_message(timeout=2)
    assert (m1["type"], m1["channel"], m1["data"]) == ("message", "ch", "one")
    assert (m2["type"], m2["pattern"], m2["channel"], m2["data"]) == \
        ("pmessage", "pat.*", "pat.x", "two")
    assert c.pubsub_numsub("ch") == [("ch", 1)]
    assert c.pubsub_numpat() == 1
    info = c.info("stats")
    assert info["pubsub_channels"] == 1 and info["pubsub_patterns"] == 1
    clients = {cl["id"]: cl for cl in c.client_list()}
    assert any(cl["sub"] == "1" and cl["psub"] == "1" for cl in clients.values())
    # a subscriber that goes away leaves nothing behind
    p.close()
    for _ in range(100):
        if c.info("stats")["pubsub_channels"] == 0:
            break
        time.sleep(0.02)
    info = c.info("stats")
    assert info["pubsub_channels"] == 0 and info["pubsub_patterns"] == 0
    assert c.publish("ch", "nobody") == 0
    c.close()


def test_many_subscribers_and_big_messages(kv):
    subs = [Conn(kv.port) for _ in range(50)]
    for i, s in enumerate(subs):
        s.s.sendall(b"SUBSCRIBE all own:%d\r\n" % i)
    for i, s in enumerate(subs):
        own = b"own:%d" % i
        want = (b"*3\r\n$9\r\nsubscribe\r\n$3\r\nall\r\n:1\r\n"
                b"*3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:2\r\n" % (len(own), own))
        assert s.read_exact(len(want)) == want
    pub = kv.client()
    big = b"x" * 200_000
    assert pub.publish("all", big) == 50
    assert pub.publish("own:7", "just you") == 1
    expect = b"*3\r\n$7\r\nmessage\r\n$3\r\nall\r\n$200000\r\n" + big + b"\r\n"
    own = b"*3\r\n$7\r\nmessage\r\n$5\r\nown:7\r\n$8\r\njust you\r\n"
    for i, s in enumerate(subs):
        assert s.read_exact(len(expect)) == expect
        if i == 7:
            assert s.read_exact(len(own)) == own
    for s in subs:
        assert s.read(0.02) == b""
    for s in subs:
        s.close()
    pub.close()


def test_subscriber_that_never_reads_is_disconnected(kv_factory):
    # subscribers are of the pubsub class, as in Redis (the normal class
    # does not apply to them)
    kv = kv_factory("--client-output-buffer-limit", "pubsub", "1mb", "0", "0")
    s = socket.create_connection(("127.0.0.1", kv.port), timeout=5)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"SUBSCRIBE flood\r\n")
    time.sleep(0.1)
    pub = kv.client()
    chunk = b"y" * 100_000
    for _ in range(200):  # 20 MB at a client that reads nothing
        pub.publish("flood", chunk)
    for _ in range(100):
        if pub.info("stats")["pubsub_channels"] == 0:
            break
        time.sleep(0.05)
    assert pub.info("stats")["pubsub_channels"] == 0
    assert pub.info("clients")["connected_clients"] == 1
    s.close()
    pub.close()
