"""Keyspace notifications, sharded Pub/Sub and the pubsub output-buffer
limit.

The notification streams are compared with a real redis-server's: both
servers get the same notify-keyspace-events, a subscriber on
__key*@*__:* each, the same commands; the (pattern, channel, message)
sequences must be equal. Sharded Pub/Sub replies are compared byte for
byte on raw connections.
"""
from __future__ import annotations

import socket
import time

import pytest
import redis


def collect(ps, quiet: float = 0.3, first: float = 2.0) -> list:
    """Messages of a redis-py PubSub until quiet seconds pass without one."""
    out = []
    deadline = time.time() + first
    while True:
        m = ps.get_message(timeout=quiet if out else max(0.0, deadline - time.time()))
        if m is None:
            if out or time.time() >= deadline:
                return out
            continue
        if m["type"] == "pmessage":
            out.append((m["channel"], m["data"]))


def subscribe(client):
    ps = client.pubsub()
    ps.psubscribe("__key*@*__:*")
    # the psubscribe confirmation
    deadline = time.time() + 5
    while time.time() < deadline:
        m = ps.get_message(timeout=0.5)
        if m and m["type"] == "psubscribe":
            break
    return ps


def as_bytes(x):
    return x.encode() if isinstance(x, str) else x


def run_both(kv, reference, flags: str, script: list, select: int = 0):
    """Runs script (lists of args) on both servers with notify flags on;
    returns the two streams of (channel, message) as bytes, and the replies
    (exceptions as their text)."""
    b = kv.client()  # bytes replies, like the reference fixture
    streams, replies = [], []
    for c in (b, reference):
        c.flushall()
        c.config_set("notify-keyspace-events", flags)
        ps = subscribe(c)
        got = []
        for args in script:
            try:
                reply = c.execute_command(*args)
                if args[0] == "SPOP":  # random members: their number only
                    reply = len(reply) if isinstance(reply, (list, set)) else reply is not None
                got.append(reply)
            except redis.ResponseError as e:
                got.append(("error", str(e)))
        replies.append(got)
        streams.append([(as_bytes(ch), as_bytes(d)) for ch, d in collect(ps)])
        ps.close()
        c.config_set("notify-keyspace-events", "")
    b.close()
    return streams, replies


def test_notifications_are_off_by_default(kv):
    """The regression: CONFIG SET used to be accepted and nothing was sent;
    with the default (empty) flags still nothing is."""
    c = kv.client()
    ps = subscribe(c)
    c.set("foo", "bar")
    c.lpush("l", "a")
    assert collect(ps, first=0.5) == []
    c.config_set("notify-keyspace-events", "KEA")
    c.set("foo", "baz")
    assert collect(ps) == [(b"__keyspace@0__:foo", b"set"), (b"__keyevent@0__:set", b"foo")]


STRING_SCRIPT = [
    ["SET", "s", "1"], ["SET", "s", "2", "EX", "100"], ["SETNX", "s", "3"],
    ["SETNX", "s2", "3"], ["SETEX", "s3", "100", "v"], ["PSETEX", "s4", "100000", "v"],
    ["GETSET", "s", "4"], ["GETDEL", "s4"], ["GETEX", "s3", "PERSIST"],
    ["GETEX", "s3", "EX", "50"], ["MSET", "m1", "a", "m2", "b", "m1", "c"],
    ["MSETNX", "m3", "x", "m1", "y"], ["MSETNX", "m4", "x", "m5", "y"],
    ["INCR", "n"], ["DECR", "n"], ["INCRBY", "n", "10"], ["DECRBY", "n", "3"],
    ["INCRBYFLOAT", "f", "1.5"], ["APPEND", "ap", "x"], ["APPEND", "ap", "yz"],
    ["SETRANGE", "sr", "3", "abc"], ["SETRANGE", "sr", "0", ""], ["SETRANGE", "sr", "0", "Z"],
    ["SET", "k", "v", "GET"], ["SET", "k", "v2", "NX"], ["SET", "k", "v3", "XX", "KEEPTTL"],
    ["INCR", "ap"], ["GET", "missing"],
]

KEYS_SCRIPT = [
    ["SET", "a", "1"], ["SET", "b", "2"], ["DEL", "a", "nosuch", "b"],
    ["SET", "e", "1"], ["EXPIRE", "e", "100"], ["PEXPIRE", "e", "100000"],
    ["EXPIREAT", "e", "4000000000"], ["PEXPIREAT", "e", "4000000000000"],
    ["PERSIST", "e"], ["PERSIST", "e"], ["EXPIRE", "e", "100", "NX"], ["EXPIRE", "e", "50", "NX"],
    ["EXPIRE", "e", "-1"], ["SET", "r", "1"], ["SET", "r2", "x"], ["RENAME", "r", "r2"],
    ["RENAMENX", "r2", "r3"], ["RENAME", "r3", "r3"], ["SET", "c", "1"], ["COPY", "c", "c2"],
    ["COPY", "c", "c2", "REPLACE"], ["COPY", "c", "c9", "DB", "3"], ["MOVE", "c", "2"],
    ["UNLINK", "c2"], ["EXISTS", "nosuch"],
]

HASH_SCRIPT = [
    ["HSET", "h", "a", "1", "b", "2"], ["HSET", "h", "a", "1"], ["HSETNX", "h", "a", "x"],
    ["HSETNX", "h", "c", "3"], ["HMSET", "h", "d", "4"], ["HINCRBY", "h", "n", "5"],
    ["HINCRBYFLOAT", "h", "f", "1.5"], ["HDEL", "h", "zz"], ["HDEL", "h", "a", "b"],
    ["HDEL", "h", "c", "d", "n", "f"], ["HINCRBY", "h2", "x", "1"], ["HGET", "nosuch", "x"],
]

LIST_SCRIPT = [
    ["LPUSH", "l", "a", "b"], ["RPUSH", "l", "c"], ["LPUSHX", "nol", "x"], ["RPUSHX", "l", "d"],
    ["LINSERT", "l", "BEFORE", "c", "x"], ["LINSERT", "l", "AFTER", "zz", "y"],
    ["LSET", "l", "0", "B"], ["LREM", "l", "0", "x"], ["LREM", "l", "0", "nothing"],
    ["LTRIM", "l", "0", "2"], ["LPOP", "l"], ["RPOP", "l", "0"], ["RPOP", "l", "5"],
    ["RPUSH", "m", "1", "2", "3"], ["RPOPLPUSH", "m", "n"], ["LMOVE", "m", "n", "LEFT", "RIGHT"],
    ["LMOVE", "m", "n", "RIGHT", "LEFT"], ["RPUSH", "one", "x"], ["RPOPLPUSH", "one", "one"],
    ["LTRIM", "n", "5", "10"], ["LRANGE", "nosuch", "0", "-1"],
]

SET_SCRIPT = [
    ["SADD", "s", "a", "b", "c"], ["SADD", "s", "a"], ["SREM", "s", "zz"], ["SREM", "s", "a"],
    ["SPOP", "s"], ["SADD", "t", "1", "2", "3", "4"], ["SPOP", "t", "0"], ["SPOP", "t", "2"],
    ["SPOP", "t", "5"], ["SADD", "x", "1", "2"], ["SADD", "y", "2", "3"],
    ["SINTERSTORE", "d", "x", "y"], ["SUNIONSTORE", "d", "x", "y"], ["SDIFFSTORE", "d", "x", "y"],
    ["SINTERSTORE", "d", "x", "nosuch"], ["SINTERSTORE", "d", "x", "nosuch"],
    ["SET", "str", "v"], ["SUNIONSTORE", "str", "x"], ["SMOVE", "x", "y", "1"],
    ["SMOVE", "x", "y", "2"], ["SMOVE", "y", "z", "3"], ["SMOVE", "y", "y", "2"],
    ["SREM", "y", "1", "2"], ["SREM", "z", "3"],
]

ZSET_SCRIPT = [
    ["ZADD", "z", "1", "a", "2", "b"], ["ZADD", "z", "1", "a"], ["ZADD", "z", "5", "a"],
    ["ZADD", "z", "INCR", "1", "a"], ["ZADD", "z", "XX", "1", "nope"], ["ZINCRBY", "z", "2", "c"],
    ["ZREM", "z", "nope"], ["ZREM", "z", "c"], ["ZADD", "w", "1", "a", "2", "b", "3", "c", "4", "d"],
    ["ZREMRANGEBYRANK", "w", "0", "0"], ["ZREMRANGEBYSCORE", "w", "2", "2"],
    ["ZREMRANGEBYLEX", "w", "[a", "[z"], ["ZREMRANGEBYSCORE", "w", "9", "10"],
    ["ZADD", "p", "1", "a", "2", "b", "3", "c"], ["ZPOPMIN", "p"], ["ZPOPMAX", "p", "5"],
    ["ZADD", "u1", "1", "a"], ["ZADD", "u2", "2", "b"], ["ZUNIONSTORE", "zu", "2", "u1", "u2"],
    ["ZINTERSTORE", "zu", "2", "u1", "u2"], ["ZUNIONSTORE", "zu", "1", "u1"],
    ["ZRANGESTORE", "zr", "u1", "0", "-1"], ["ZRANGESTORE", "zr", "u1", "5", "6"],
    ["ZRANGESTORE", "zr", "u1", "5", "6"], ["ZREM", "z", "a", "b"],
]


# The families merged beside notifications: bitmaps, HyperLogLog, geo, SORT,
# DUMP/RESTORE, the list/zset MPOP forms and ZDIFFSTORE.
MERGED_SCRIPT = [
    ["SETBIT", "b", "7", "1"], ["SETBIT", "b", "7", "1"], ["SETBIT", "b", "100", "0"],
    ["BITFIELD", "bf", "SET", "u8", "0", "255"], ["BITFIELD", "bf", "GET", "u8", "0"],
    ["BITOP", "OR", "bo", "b", "bf"], ["BITOP", "AND", "bo", "nosuch1", "nosuch2"],
    ["PFADD", "h", "a", "b"], ["PFADD", "h", "a"], ["PFMERGE", "hm", "h"],
    ["GEOADD", "g", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania"],
    ["GEOSEARCHSTORE", "gs", "g", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "ASC"],
    ["GEORADIUS", "g", "15", "37", "200", "km", "STORE", "gr"],
    ["GEOSEARCHSTORE", "gs", "g", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "km"],
    ["RPUSH", "sl", "3", "1", "2"], ["SORT", "sl", "STORE", "so"], ["SORT", "nosuch", "STORE", "so"],
    ["RPUSH", "ml", "a", "b"], ["LMPOP", "1", "ml", "LEFT", "COUNT", "5"],
    ["ZADD", "mz", "1", "a", "2", "b"], ["ZMPOP", "1", "mz", "MAX"], ["ZMPOP", "1", "mz", "MIN"],
    ["ZADD", "d1", "1", "a", "2", "b"], ["ZADD", "d2", "1", "a"], ["ZDIFFSTORE", "dd", "2", "d1", "d2"],
    ["SET", "r", "v"],
]


def test_merged_families_notify_like_redis(kv, reference):
    reference.set("dumped", "v")
    payload = reference.dump("dumped")
    script = MERGED_SCRIPT + [["RESTORE", "r2", "0", payload],
                              ["RESTORE", "r2", "0", payload, "REPLACE"]]
    streams, replies = run_both(kv, reference, "KEA", script)
    assert replies[0] == replies[1]
    assert streams[0] == streams[1]
    channels = {ch for ch, _ in streams[0]}
    for ev in (b"setbit", b"pfadd", b"geosearchstore", b"georadiusstore", b"sortstore",
               b"restore", b"zdiffstore", b"lpop", b"zpopmax"):
        assert b"__keyevent@0__:" + ev in channels, ev


@pytest.mark.parametrize("script", [STRING_SCRIPT, KEYS_SCRIPT, HASH_SCRIPT, LIST_SCRIPT,
                                    SET_SCRIPT, ZSET_SCRIPT],
                         ids=["string", "keys", "hash", "list", "set", "zset"])
@pytest.mark.parametrize("flags", ["KEA", "KEAmn"])
def test_notification_stream_equals_redis(kv, reference, script, flags):
    streams, replies = run_both(kv, reference, flags, script)
    assert replies[0] == replies[1]
    assert streams[0] == streams[1]
    assert streams[0], "the script must produce events"


@pytest.mark.parametrize("flags", ["Kg", "E$", "Kl", "Es", "Kh", "Ez", "KEn", "Km", "gE"])
def test_class_masks_equal_redis(kv, reference, flags):
    script = STRING_SCRIPT[:8] + LIST_SCRIPT[:6] + SET_SCRIPT[:5] + HASH_SCRIPT[:4] + \
        ZSET_SCRIPT[:4] + KEYS_SCRIPT[:6]
    streams, _ = run_both(kv, reference, flags, script)
    assert streams[0] == streams[1]


MISSING_KEYS_SCRIPT = [
    ["COPY", "nosuch", "d"], ["RENAME", "nosuch", "d"], ["MOVE", "nosuch", "3"],
    ["ZUNIONSTORE", "d", "2", "nosuch", "nosuch2"], ["ZINTERSTORE", "d", "1", "nosuch"],
    ["ZRANGESTORE", "d", "nosuch", "0", "-1"], ["SUNIONSTORE", "d", "nosuch"],
    ["SDIFFSTORE", "d", "nosuch", "x"], ["SMOVE", "nosuch", "d", "m"],
    ["RPOPLPUSH", "nosuch", "d"], ["LMOVE", "nosuch", "d", "LEFT", "LEFT"],
    ["GETDEL", "nosuch"], ["GETEX", "nosuch", "PERSIST"], ["GETSET", "nosuch", "v"],
    ["APPEND", "nosuch", "v"], ["INCR", "nosuch2"], ["EXPIRE", "nosuch3", "10"],
    ["TTL", "nosuch3"], ["TYPE", "nosuch3"], ["EXISTS", "nosuch3"], ["OBJECT", "ENCODING", "x"],
    ["HGETALL", "nosuch3"], ["LLEN", "nosuch3"], ["SMEMBERS", "nosuch3"], ["ZCARD", "nosuch3"],
    ["SINTERCARD", "1", "nosuch3"], ["ZSCORE", "nosuch3", "m"], ["HSETNX", "nh", "f", "v"],
    ["SPOP", "nosuch3"], ["LPOP", "nosuch3"], ["ZPOPMIN", "nosuch3"], ["DEL", "nosuch3"],
    ["PERSIST", "nosuch3"], ["SETRANGE", "nosuch3", "0", ""], ["STRLEN", "nosuch3"],
]


def test_keymiss_events_equal_redis(kv, reference):
    streams, replies = run_both(kv, reference, "KEm", MISSING_KEYS_SCRIPT)
    assert replies[0] == replies[1]
    assert streams[0] == streams[1]


def test_select_db_in_channel_names(kv, reference):
    b = kv.client()
    for c in (b, reference):
        c.config_set("notify-keyspace-events", "KEA")
    streams = []
    for c in (b, reference):
        ps = subscribe(c)
        c.execute_command("SELECT", "5")  # the connection pool's one connection
        c.set("k", "v")
        c.execute_command("SELECT", "0")
        streams.append(collect(ps))
        ps.close()
    assert streams[0] == streams[1] == [(b"__keyspace@5__:k", b"set"),
                                        (b"__keyevent@5__:set", b"k")]


def test_expired_events(kv):
    c = kv.client()
    c.config_set("notify-keyspace-events", "Ex")
    ps = subscribe(c)
    c.set("lazy", "v", px=1)
    c.set("active", "v", px=1)
    time.sleep(0.05)
    c.get("lazy")  # the lazy path
    got = collect(ps, first=3.0)  # the active cycle takes the other one
    assert sorted(got) == [(b"__keyevent@0__:expired", b"active"),
                           (b"__keyevent@0__:expired", b"lazy")]


def test_evicted_events(kv):
    c = kv.client()
    c.config_set("notify-keyspace-events", "Ee")
    c.config_set("maxmemory-policy", "allkeys-lru")
    ps = subscribe(c)
    c.set("foo", "bar")
    c.config_set("maxmemory", "1")
    got = collect(ps)
    c.config_set("maxmemory", "0")
    assert (b"__keyevent@0__:evicted", b"foo") in got


def test_config_flags_normalised_like_redis(kv, reference):
    b = kv.client()
    for flags in ["gKE", "$lshzxeKE", "KA", "EA", "KEA", "An", "nA", "Kn", "Km", "KAmn",
                  "Ag$lshzxeKEtmdn", "", "A", "x", "dt"]:
        b.config_set("notify-keyspace-events", flags)
        reference.config_set("notify-keyspace-events", flags)
        assert b.config_get("notify-keyspace-events") == \
            reference.config_get("notify-keyspace-events"), flags
    errs = []
    for c in (b, reference):
        c.config_set("notify-keyspace-events", "KEAm")
        with pytest.raises(redis.ResponseError) as e:
            c.config_set("notify-keyspace-events", "KEq")
        errs.append(str(e.value))
        # a refused value leaves the old one
        assert list(c.config_get("notify-keyspace-events").values()) in ([b"AKEm"], ["AKEm"])
    assert errs[0] == errs[1]


def test_huge_key_in_channel_name(kv):
    c = kv.client()
    c.config_set("notify-keyspace-events", "KEA")
    ps = subscribe(c)
    key = b"k" * 100000
    c.set(key, "v")
    got = collect(ps)
    assert got == [(b"__keyspace@0__:" + key, b"set"), (b"__keyevent@0__:set", key)]


# ---- sharded Pub/Sub ----

class Conn:
    def __init__(self, port: int):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)

    def send(self, *args) -> None:
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)

    def cmd(self, *args) -> bytes:
        self.send(*args)
        return self.read()

    def read(self, wait: float = 0.1) -> bytes:
        got = b""
        self.s.settimeout(3.0)
        while True:
            try:
                b = self.s.recv(65536)
            except socket.timeout:
                return got
            if not b:
                return got + b"<closed>"
            got += b
            self.s.settimeout(wait)

    def close(self):
        self.s.close()


SHARD_SESSION = [
    ("sub", ["SSUBSCRIBE", "chan1"]), ("sub", ["SSUBSCRIBE", "chan2", "chan2"]),
    ("pub", ["SPUBLISH", "chan1", "hello"]), ("sub", []),
    ("pub", ["PUBLISH", "chan1", "not-for-shard"]),
    ("pub", ["PUBSUB", "SHARDNUMSUB", "chan1", "chan2", "nope"]),
    ("pub", ["PUBSUB", "SHARDCHANNELS", "nomatch*"]),
    ("pub", ["PUBSUB", "SHARDNUMSUB"]), ("pub", ["PUBSUB", "NUMSUB", "chan1"]),
    ("pub", ["PUBSUB", "SHARDCHANNELS", "a", "b"]),
    ("sub", ["SUBSCRIBE", "plain"]), ("sub", ["PING"]), ("sub", ["GET", "x"]),
    ("sub", ["SUNSUBSCRIBE", "chan1"]), ("sub", ["SUNSUBSCRIBE", "nope"]),
    ("sub", ["UNSUBSCRIBE"]), ("sub", ["SUNSUBSCRIBE", "chan2"]), ("sub", ["SUNSUBSCRIBE"]),
    ("sub", ["GET", "x"]),
    ("pub", ["SPUBLISH", "chan1", "gone"]), ("pub", ["SPUBLISH"]),
    ("pub", ["SSUBSCRIBE"]),
]


@pytest.mark.parametrize("proto", [2, 3])
def test_sharded_pubsub_bytes_equal_redis(kv, reference, proto):
    ref_port = reference.connection_pool.connection_kwargs["port"]
    out = []
    for port in (kv.port, ref_port):
        sub, pub = Conn(port), Conn(port)
        if proto == 3:
            sub.cmd("HELLO", "3")
            pub.cmd("HELLO", "3")
        got = []
        for who, args in SHARD_SESSION:
            c = sub if who == "sub" else pub
            got.append((who, c.cmd(*args) if args else c.read()))
        out.append(got)
        sub.close()
        pub.close()
    assert out[0] == out[1]


def test_sharded_subscriber_closed_is_forgotten(kv):
    c = kv.client()
    s = Conn(kv.port)
    s.cmd("SSUBSCRIBE", "a", "b")
    assert c.execute_command("PUBSUB", "SHARDNUMSUB", "a") == [b"a", 1]
    s.close()
    time.sleep(0.2)
    assert c.execute_command("PUBSUB", "SHARDNUMSUB", "a") == [b"a", 0]
    assert c.execute_command("PUBSUB", "SHARDCHANNELS") == []


# ---- client-output-buffer-limit ----

def test_output_buffer_limit_config_like_redis(kv, reference):
    b = kv.client()
    for c in (b, reference):
        c.config_set("client-output-buffer-limit", "normal 0 0 0")
    assert b.config_get("client-output-buffer-limit") == \
        reference.config_get("client-output-buffer-limit")
    for c in (b, reference):
        c.config_set("client-output-buffer-limit", "pubsub 1mb 1mb 2147483647")
        c.config_set("client-output-buffer-limit", "pubsub 1mb 1mb 0 replica 1gb 2k 10")
    assert b.config_get("client-output-buffer-limit") == \
        reference.config_get("client-output-buffer-limit")
    for bad in ["pubsub 1mb 1mb", "foo 1 1 1", "pubsub x 1 1", "pubsub 1 1 -1",
                "normal 1 1 1 pubsub 1 1", "pubsub 1 1 2147483648",
                "pubsub 1 1 9223372036854775808", "pubsub -1 1 1"]:
        errs = []
        for c in (b, reference):
            with pytest.raises(redis.ResponseError) as e:
                c.config_set("client-output-buffer-limit", bad)
            errs.append(str(e.value))
        assert errs[0] == errs[1], bad
    # nothing of a refused value was applied
    assert b.config_get("client-output-buffer-limit") == \
        reference.config_get("client-output-buffer-limit")


def test_pubsub_limit_drops_a_subscriber_that_never_reads(kv):
    """The regression: "pubsub 1mb 1mb 0" was accepted and changed nothing."""
    c = kv.client()
    c.config_set("client-output-buffer-limit", "pubsub 1mb 1mb 0")
    s = Conn(kv.port)
    s.cmd("SUBSCRIBE", "ch")
    s.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    assert c.execute_command("PUBSUB", "NUMSUB", "ch") == [b"ch", 1]
    msg = b"x" * (256 * 1024)
    for _ in range(200):  # 50 MB: far past what the socket buffers hold
        if c.publish("ch", msg) == 0:
            break
    deadline = time.time() + 5
    while time.time() < deadline and c.execute_command("PUBSUB", "NUMSUB", "ch")[1]:
        time.sleep(0.05)
    assert c.execute_command("PUBSUB", "NUMSUB", "ch") == [b"ch", 0]
    assert c.ping()
    s.close()


def test_normal_clients_not_held_to_the_pubsub_limit(kv):
    c = kv.client()
    c.config_set("client-output-buffer-limit", "pubsub 1kb 1kb 0")
    c.set("big", "x" * 100000)
    assert len(c.get("big")) == 100000
