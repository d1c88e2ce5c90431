"""COMMAND, SLOWLOG, LATENCY, INFO and MEMORY, side by side with a real
redis-server: raw RESP2 and RESP3 bytes of COMMAND INFO / GETKEYS for every
command both servers have, the same errors for the same bad input, and
every INFO field Redis 7.0 reports present in brisk-kv's.
"""
from __future__ import annotations

import socket
import time

import pytest
import redis


class Raw:
    """A raw RESP connection that reads exactly one reply per command."""

    def __init__(self, port: int, proto: int = 2):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.f = self.s.makefile("rb")
        if proto == 3:
            self.cmd("HELLO", "3")

    def cmd(self, *args) -> bytes:
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        return self.read_one()

    def read_one(self) -> bytes:
        line = self.f.readline()
        t = line[:1]
        if t in b"+-:,#_(":
            return line
        if t in b"$=!":
            n = int(line[1:-2])
            return line if n < 0 else line + self.f.read(n + 2)
        if t in b"*~>%|":
            n = int(line[1:-2])
            if n < 0:
                return line
            if t in b"%|":
                n *= 2
            return line + b"".join(self.read_one() for _ in range(n))
        raise AssertionError(line)

    def close(self):
        self.s.close()


def parse(b: bytes):
    """A RESP2/RESP3 reply as Python values (type letters kept for sets and maps)."""
    def one(i):
        j = b.index(b"\r\n", i)
        t, v = b[i:i + 1], b[i + 1:j]
        i = j + 2
        if t in b"$=":
            n = int(v)
            return (None, i) if n < 0 else (b[i:i + n], i + n + 2)
        if t in b"*~%>":
            n = int(v) * (2 if t == b"%" else 1)
            out = []
            for _ in range(n):
                x, i = one(i)
                out.append(x)
            return (t.decode(), out), i
        return (t.decode(), v), i
    return one(0)[0]


def info_entry(reply: bytes):
    """COMMAND INFO of one command, subcommands sorted: Redis lists them in
    the order of a hash table with a per-process seed."""
    kind, items = parse(reply)
    entries = []
    for e in items:
        if isinstance(e, tuple) and e[0] == "*" and len(e[1]) == 10:
            fields = list(e[1])
            fields[9] = (fields[9][0], sorted(fields[9][1], key=repr))
            entries.append(fields)
        else:
            entries.append(e)
    return entries


def sorted_pairs(v):
    """Sorts the key/value pairs of a parsed map (or RESP2 flat array)."""
    kind, items = v
    pairs = [(items[i], items[i + 1]) for i in range(0, len(items), 2)]
    return kind, sorted(pairs, key=repr)


def docs_entry(reply: bytes):
    """COMMAND DOCS of one command, its subcommands' order aside (a hash
    table's order in Redis)."""
    kind, items = parse(reply)
    doc_kind, doc = items[1]
    doc = list(doc)
    for i in range(0, len(doc), 2):
        if doc[i] == b"subcommands":
            doc[i + 1] = sorted_pairs(doc[i + 1])
    return kind, items[0], doc_kind, doc


def ref_port(reference) -> int:
    return reference.connection_pool.connection_kwargs["port"]


def bulk_list(reply: bytes) -> list[str]:
    """The strings of a RESP array of bulk strings."""
    lines = reply.split(b"\r\n")
    return [lines[i].decode() for i in range(2, len(lines), 2)]


def command_list(port: int, *filters: str) -> list[str]:
    c = Raw(port)
    names = bulk_list(c.cmd("COMMAND", "LIST", *filters))
    c.close()
    return names


def common_commands(kv, reference) -> list[str]:
    return sorted(set(command_list(kv.port)) & set(command_list(ref_port(reference))))


@pytest.mark.parametrize("proto", [2, 3])
def test_command_info_equals_redis(kv, reference, proto):
    names = common_commands(kv, reference)
    assert len(names) > 150
    a, b = Raw(kv.port, proto), Raw(ref_port(reference), proto)
    for name in names:
        assert info_entry(a.cmd("COMMAND", "INFO", name)) == \
            info_entry(b.cmd("COMMAND", "INFO", name)), name
    assert a.cmd("COMMAND", "INFO", "nosuch", "get") == b.cmd("COMMAND", "INFO", "nosuch", "get")
    for name in names:
        assert docs_entry(a.cmd("COMMAND", "DOCS", name)) == \
            docs_entry(b.cmd("COMMAND", "DOCS", name)), name
    a.close()
    b.close()


GETKEYS = [
    ["get", "k"], ["set", "k", "v"], ["mset", "a", "1", "b", "2"], ["mget", "a", "b", "c"],
    ["del", "a", "b"], ["rename", "a", "b"], ["zunionstore", "d", "2", "a", "b"],
    ["zunionstore", "d", "3", "a", "b"], ["zunionstore", "d", "-1", "a"],
    ["zinterstore", "d", "1", "a", "WEIGHTS", "2"], ["sintercard", "2", "a", "b"],
    ["sintercard", "5", "a"], ["lmove", "a", "b", "LEFT", "RIGHT"], ["smove", "a", "b", "m"],
    ["object", "encoding", "k"], ["object", "foo", "k"], ["memory", "usage", "k"],
    ["ping"], ["get"], ["nosuch", "x"], ["zrangestore", "d", "s", "0", "1"],
    ["copy", "a", "b", "DB", "2"], ["set", "k"], ["watch", "a", "b"], ["publish", "c", "m"],
    ["ssubscribe", "a", "b"], ["spublish", "c", "m"], ["expire", "k", "10"],
    ["hset", "h", "f", "v"], ["sinterstore", "d", "a", "b"], ["rpoplpush", "a", "b"],
    ["getex", "k", "PERSIST"], ["sintercard", "x", "a"], ["debug", "sleep", "0"],
    ["config", "get", "x"], ["client", "id"],
]


@pytest.mark.parametrize("proto", [2, 3])
def test_getkeys_equals_redis(kv, reference, proto):
    names = set(common_commands(kv, reference))
    a, b = Raw(kv.port, proto), Raw(ref_port(reference), proto)
    for line in GETKEYS:
        if line[0] not in names and line[0] != "nosuch":
            continue
        for sub in ("GETKEYS", "GETKEYSANDFLAGS"):
            assert a.cmd("COMMAND", sub, *line) == b.cmd("COMMAND", sub, *line), (sub, line)
    for bad in (["COMMAND", "GETKEYS"], ["COMMAND", "GETKEYS", "get"], ["COMMAND", "COUNT", "x"],
                ["COMMAND", "LIST", "x"], ["COMMAND", "LIST", "FILTERBY", "foo", "x"],
                ["COMMAND", "LIST", "FILTERBY", "MODULE", "foo"], ["COMMAND", "FOO"],
                ["COMMAND", "HELP"], ["COMMAND", "HELP", "x"], ["COMMAND", "DOCS", "nosuch"]):
        assert a.cmd(*bad) == b.cmd(*bad), bad
    a.close()
    b.close()


def test_command_list_info_docs_of_subcommands_equal_redis(kv, reference):
    mine, theirs = command_list(kv.port), command_list(ref_port(reference))
    top = [n for n in mine if "|" not in n]
    # every subcommand Redis lists for the containers brisk-kv has
    want = {n for n in theirs if "|" in n and n.split("|")[0] in top}
    assert want and want <= set(mine)
    for pat in ("config*", "config|*re*", "cl*help", "non_exists*", "set"):
        got = set(command_list(kv.port, "FILTERBY", "PATTERN", pat))
        ref = {n for n in command_list(ref_port(reference), "FILTERBY", "PATTERN", pat)
               if n.split("|")[0] in top}
        assert got == ref, pat
    for cat in ("hash", "pubsub", "admin", "no_such_category"):
        got = set(command_list(kv.port, "FILTERBY", "ACLCAT", cat))
        ref = {n for n in command_list(ref_port(reference), "FILTERBY", "ACLCAT", cat)
               if n.split("|")[0] in top}
        assert got == ref, cat
    a, b = Raw(kv.port), Raw(ref_port(reference))
    for name in ("config|get", "CONFIG|SET", "client|list", "get|key", "config|get|key",
                 "nosuch|x"):
        assert a.cmd("COMMAND", "INFO", name) == b.cmd("COMMAND", "INFO", name), name
        assert a.cmd("COMMAND", "DOCS", name) == b.cmd("COMMAND", "DOCS", name), name
    a.close()
    b.close()


def test_command_count_and_list_filters(kv):
    c = kv.client(decode_responses=True)
    names = [n for n in command_list(kv.port) if "|" not in n]  # COUNT: no subcommands
    r = Raw(kv.port)
    assert r.cmd("COMMAND", "COUNT") == b":%d\r\n" % len(names)
    r.close()
    assert len(names) == len(set(names))
    assert set(command_list(kv.port, "FILTERBY", "PATTERN", "z*add")) == {"zadd"}
    assert "config|get" in command_list(kv.port, "FILTERBY", "PATTERN", "config*")
    hashes = command_list(kv.port, "FILTERBY", "ACLCAT", "hash")
    assert "hset" in hashes and "get" not in hashes
    assert command_list(kv.port, "FILTERBY", "MODULE", "x") == []
    assert len(c.execute_command("COMMAND")) == len(names)  # redis-py's parse of it


# ---- SLOWLOG ----

def test_slowlog_records_trims_and_resets(kv):
    c = kv.client(decode_responses=True)
    assert c.execute_command("SLOWLOG", "LEN") == 0
    c.client_setname("me")
    c.config_set("slowlog-log-slower-than", "0")
    c.config_set("slowlog-max-len", "10")
    for _ in range(30):
        c.ping()
    assert c.execute_command("SLOWLOG", "LEN") == 10
    assert len(c.execute_command("SLOWLOG", "GET", "5")) == 5
    assert len(c.execute_command("SLOWLOG", "GET", "-1")) == 10
    assert len(c.execute_command("SLOWLOG", "GET", "0")) == 0
    c.execute_command("SLOWLOG", "RESET")
    c.execute_command("SADD", "set", *[str(i) for i in range(3, 34)])
    e = c.execute_command("SLOWLOG", "GET")[0]  # newest first, before the RESET
    assert len(e) == 6
    assert e[3] == ["SADD", "set"] + [str(i) for i in range(3, 32)] + ["... (2 more arguments)"]
    assert e[5] == "me" and ":" in e[4]
    c.execute_command("SLOWLOG", "RESET")
    c.execute_command("SADD", "set", "foo", "A" * 129)
    e = c.execute_command("SLOWLOG", "GET")[0]
    assert e[3] == ["SADD", "set", "foo", "A" * 128 + "... (1 more bytes)"]
    # ids keep growing across a RESET; newest first
    ids = [x[0] for x in c.execute_command("SLOWLOG", "GET")]
    assert ids == sorted(ids, reverse=True) and ids[-1] > 30
    c.config_set("slowlog-log-slower-than", "-1")
    c.execute_command("SLOWLOG", "RESET")
    c.ping()
    assert c.execute_command("SLOWLOG", "LEN") == 0


def test_slowlog_does_not_log_exec_and_redacts_auth(kv):
    c = kv.client(decode_responses=True)
    c.config_set("slowlog-log-slower-than", "0")
    c.execute_command("SLOWLOG", "RESET")
    p = c.pipeline(transaction=True)
    p.set("a", "1")
    p.get("a")
    p.execute()
    logged = [e[3][0].lower() for e in c.execute_command("SLOWLOG", "GET", "-1")]
    assert "exec" not in logged and "set" in logged and "get" in logged
    raw = Raw(kv.port)
    raw.cmd("CONFIG", "SET", "requirepass", "pw")
    assert raw.cmd("AUTH", "secret-password").startswith(b"-WRONGPASS")
    assert raw.cmd("AUTH", "default", "pw2").startswith(b"-WRONGPASS")
    raw.cmd("CONFIG", "SET", "requirepass", "")
    got = raw.cmd("SLOWLOG", "GET", "3")
    raw.close()
    assert b"secret-password" not in got and b"pw2" not in got
    assert got.count(b"(redacted)") == 4  # AUTH pw, AUTH user pw, CONFIG SET requirepass


def test_slowlog_errors_equal_redis(kv, reference):
    a, b = Raw(kv.port), Raw(ref_port(reference))
    for bad in (["SLOWLOG", "GET", "-2"], ["SLOWLOG", "GET", "x"], ["SLOWLOG", "GET", "1", "2"],
                ["SLOWLOG", "LEN", "x"], ["SLOWLOG", "RESET", "x"], ["SLOWLOG", "FOO"],
                ["SLOWLOG", "HELP"], ["SLOWLOG", "HELP", "x"], ["SLOWLOG"],
                ["SLOWLOG", "GET", "-9223372036854775808"],
                ["CONFIG", "SET", "slowlog-log-slower-than", "-2"],
                ["CONFIG", "SET", "slowlog-max-len", "-1"],
                ["CONFIG", "SET", "slowlog-log-slower-than", "x"],
                ["CONFIG", "SET", "latency-monitor-threshold", "-1"],
                ["CONFIG", "GET", "slowlog-max-len"],
                ["CONFIG", "GET", "slowlog-log-slower-than"],
                ["CONFIG", "GET", "latency-monitor-threshold"]):
        assert a.cmd(*bad) == b.cmd(*bad), bad
    a.close()
    b.close()


# ---- LATENCY ----

def test_latency_replies_equal_redis(kv, reference):
    a, b = Raw(kv.port), Raw(ref_port(reference))
    for cmd in (["LATENCY", "HELP"], ["LATENCY", "HELP", "x"], ["LATENCY", "LATEST"],
                ["LATENCY", "LATEST", "x"], ["LATENCY", "HISTORY"], ["LATENCY", "HISTORY", "x"],
                ["LATENCY", "RESET"], ["LATENCY", "RESET", "foo"], ["LATENCY", "GRAPH", "foo"],
                ["LATENCY", "FOO"], ["LATENCY", "DOCTOR"], ["LATENCY", "HISTOGRAM", "nosuch"]):
        assert a.cmd(*cmd) == b.cmd(*cmd), cmd
    a.close()
    b.close()


def test_latency_histogram_counts_calls(kv):
    c = kv.client(decode_responses=True)
    c.config_resetstat()
    c.set("a", "b")
    c.set("c", "d")
    c.get("a")
    c3 = kv.client(decode_responses=True, protocol=3)
    h = c3.execute_command("LATENCY", "HISTOGRAM", "set", "get", "nosuch")
    assert h["set"]["calls"] == 2 and h["get"]["calls"] == 1
    buckets = h["set"]["histogram_usec"]
    assert len(buckets) >= 1 and list(buckets.values())[-1] == 2  # cumulative


def test_latency_events_recorded(kv_factory):
    kv = kv_factory("--enable-debug-command", "yes")
    c = kv.client(decode_responses=True)
    c.config_set("latency-monitor-threshold", "1")
    c.execute_command("DEBUG", "SLEEP", "0.02")
    latest = c.execute_command("LATENCY", "LATEST")
    assert latest and latest[0][0] == "command" and latest[0][2] >= 15
    hist = c.execute_command("LATENCY", "HISTORY", "command")
    assert len(hist) == 1 and hist[0][1] >= 15
    assert "command" in c.execute_command("LATENCY", "DOCTOR")
    assert "command" in c.execute_command("LATENCY", "GRAPH", "command")
    assert c.execute_command("LATENCY", "RESET") == 1
    assert c.execute_command("LATENCY", "LATEST") == []


def test_latency_expire_cycle_event(kv):
    c = kv.client(decode_responses=True)
    c.config_set("latency-monitor-threshold", "1")
    for i in range(0, 300000, 10000):
        c.sadd("big", *range(i, i + 10000))
    c.pexpire("big", 20)
    deadline = time.time() + 5
    while c.dbsize() and time.time() < deadline:
        time.sleep(0.05)
    assert c.dbsize() == 0
    assert "expire-cycle" in [e[0] for e in c.execute_command("LATENCY", "LATEST")]


# ---- INFO ----

SKIP_PREFIX = ("cmdstat_", "errorstat_", "latency_percentiles_", "db")


def test_info_fields_present(kv, reference):
    b = kv.client()
    b.set("k", "v")
    for section in (None, "everything", "all", "default", "server", "clients", "memory",
                    "persistence", "stats", "replication", "cpu", "cluster", "keyspace",
                    "commandstats", "errorstats", "latencystats"):
        mine = b.info(section) if section else b.info()
        ref = reference.info(section) if section else reference.info()
        missing = [k for k in ref if not k.startswith(SKIP_PREFIX) and k not in mine]
        assert not missing, (section, missing)
    info = b.info("everything")
    assert info["cluster_enabled"] == 0 and info["role"] == "master"
    assert info["connected_slaves"] == 0 and len(info["master_replid"]) == 40
    assert "db0" in info


class InfoRaw(Raw):
    def execute_command(self, *args) -> str:
        r = self.cmd(*args)
        return r[r.index(b"\r\n") + 2:-2].decode()


def test_info_sections_like_redis(kv, reference):
    b = InfoRaw(kv.port)
    raw = b.execute_command("INFO", "cpu", "sentinel")
    assert raw.startswith("# CPU") and "used_memory" not in raw
    raw = b.execute_command("INFO", "commandSTATS")
    assert "cmdstat_info" in raw and "used_memory" not in raw
    default = b.execute_command("INFO")
    assert "rejected_calls" not in default and "# Errorstats" in default
    assert "rejected_calls" in b.execute_command("INFO", "all")
    assert "# Modules" in b.execute_command("INFO", "everything")
    assert "# Modules" not in b.execute_command("INFO", "all")
    both = b.execute_command("INFO", "cpu", "all")
    assert both.count("used_cpu_user_children") == 1
    headers = [l for l in b.execute_command("INFO", "everything").split("\r\n")
               if l.startswith("#")]
    r = Raw(ref_port(reference))
    ref = [l for l in r.cmd("INFO", "everything").decode().split("\r\n") if l.startswith("#")]
    r.close()
    assert headers == ref


def test_latency_tracking_config_like_redis(kv, reference):
    a, b = Raw(kv.port), Raw(ref_port(reference))
    for cmd in (["CONFIG", "GET", "latency-tracking"],
                ["CONFIG", "GET", "latency-tracking-info-percentiles"],
                ["CONFIG", "SET", "latency-tracking-info-percentiles", "0.0 50.0 100.0"],
                ["CONFIG", "GET", "latency-tracking-info-percentiles"],
                ["CONFIG", "SET", "latency-tracking-info-percentiles", "10 a"],
                ["CONFIG", "SET", "latency-tracking-info-percentiles", "101"],
                ["CONFIG", "SET", "latency-tracking-info-percentiles", "-1"],
                ["CONFIG", "SET", "latency-tracking-info-percentiles", "99.99 12.5"],
                ["CONFIG", "GET", "latency-tracking-info-percentiles"],
                ["CONFIG", "SET", "latency-tracking", "maybe"],
                ["CONFIG", "SET", "latency-tracking", "no"],
                ["CONFIG", "RESETSTAT"], ["SET", "a", "b"], ["INFO", "latencystats"],
                ["LATENCY", "HISTOGRAM", "set"], ["CONFIG", "SET", "latency-tracking", "yes"]):
        assert a.cmd(*cmd) == b.cmd(*cmd), cmd
    a.cmd("SET", "a", "b")
    line = [l for l in a.cmd("INFO", "latencystats").decode().split("\r\n")
            if l.startswith("latency_percentiles_usec_set:")]
    assert len(line) == 1 and line[0].count("=") == 2
    assert "p99.99=" in line[0] and "p12.5=" in line[0]
    a.close()
    b.close()


def test_errorstats_and_resetstat(kv):
    c = kv.client(decode_responses=True)
    c.config_resetstat()
    with pytest.raises(redis.ResponseError):
        c.execute_command("NOSUCHCOMMAND")
    with pytest.raises(redis.ResponseError):
        c.execute_command("SET", "k")
    c.set("s", "v")
    with pytest.raises(redis.ResponseError):
        c.lpush("s", "x")
    info = c.info("errorstats")
    assert info["errorstat_ERR"]["count"] == 2
    assert info["errorstat_WRONGTYPE"]["count"] == 1
    assert c.info("stats")["total_error_replies"] == 3
    c.config_resetstat()
    assert c.info("errorstats") == {}


def test_commandstats_like_redis(kv, reference):
    """Rejected (arity) is not failed; container commands by subcommand."""
    got = []
    for c in (kv.client(decode_responses=True), reference):
        c.config_resetstat()
        with pytest.raises(redis.ResponseError):
            c.execute_command("SET", "k")
        c.execute_command("CONFIG", "GET", "maxmemory")
        with pytest.raises(redis.ResponseError):
            c.execute_command("CONFIG", "SET", "maxmemory", "x")
        c.execute_command("CLIENT", "ID")
        st = c.info("commandstats")
        got.append({k: (v["calls"], v["rejected_calls"], v["failed_calls"])
                    for k, v in st.items() if k != "cmdstat_info"})
    assert got[0] == got[1]
    assert got[0]["cmdstat_set"] == (0, 1, 0)
    assert got[0]["cmdstat_config|set"] == (1, 0, 1)


# ---- MEMORY ----

def test_memory_commands(kv, reference):
    c = kv.client()
    c.set("s", "v")
    c.rpush("l", *range(1000))
    c.zadd("z", {str(i): i for i in range(1000)})
    c.hset("h", mapping={str(i): "x" * 20 for i in range(500)})
    assert c.memory_usage("nosuch") is None
    small = c.memory_usage("s")
    assert 0 < small < 200
    for key in ("l", "z", "h"):
        full = c.memory_usage(key, samples=0)
        assert full > 1000 * 8 if key != "h" else full > 500 * 20
        assert abs(c.memory_usage(key) - full) < full  # a sampled estimate
    stats = c.memory_stats()
    for field in ("peak.allocated", "total.allocated", "keys.count", "dataset.bytes",
                  "fragmentation", "db.0"):
        assert field in stats, field
    assert stats["keys.count"] == 4
    ref_stats = reference.memory_stats()
    assert set(ref_stats) - set(stats) <= {"db.0"}
    a, b = Raw(kv.port), Raw(ref_port(reference))
    for cmd in (["MEMORY", "HELP"], ["MEMORY", "USAGE"], ["MEMORY", "USAGE", "s", "SAMPLES"],
                ["MEMORY", "USAGE", "s", "SAMPLES", "x"], ["MEMORY", "USAGE", "s", "foo"],
                ["MEMORY", "USAGE", "nosuch"], ["MEMORY", "PURGE"], ["MEMORY", "STATS", "x"],
                ["MEMORY", "DOCTOR", "x"], ["MEMORY", "FOO"],
                ["MEMORY", "USAGE", "s", "SAMPLES", "-9223372036854775808"]):
        assert a.cmd(*cmd) == b.cmd(*cmd), cmd
    assert c.execute_command("MEMORY", "DOCTOR")
    assert c.execute_command("MEMORY", "MALLOC-STATS")
    a.close()
    b.close()
