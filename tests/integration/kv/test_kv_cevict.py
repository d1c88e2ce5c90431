"""Client eviction (maxmemory-clients, CLIENT NO-EVICT, INFO evicted_clients,
CLIENT LIST tot-mem) and oom-score-adj, side by side with a real
redis-server 7: the same configuration replies and errors, and the same
clients evicted, including clients that flood their query buffer or their
subscriptions (the server stays up, its memory bounded)."""
from __future__ import annotations

import os
import socket
import time

import pytest
import redis

from kvlib import start_redis, stop_redis

MB = 1024 * 1024


def _call(c, *args):
    try:
        r = c.execute_command(*args)
    except redis.ResponseError as e:
        return ("ERR", str(e))
    return r.decode() if isinstance(r, bytes) else r


def _get(c, name):
    v = c.config_get(name)
    return {(k.decode() if isinstance(k, bytes) else k): (x.decode() if isinstance(x, bytes) else x)
            for k, x in v.items()}[name]


@pytest.fixture
def both(kv_factory, tmp_path):
    kv = kv_factory(workdir=tmp_path)
    (tmp_path / "ref").mkdir()
    proc, ref = start_redis(tmp_path / "ref")
    yield kv, ref
    stop_redis(proc, ref)


def _port(c):
    return c.connection_pool.connection_kwargs["port"]


def _clients(c):
    return {(l["name"].decode() if isinstance(l["name"], bytes) else l["name"]): l
            for l in c.client_list()}


def _info_evicted(c):
    return int(c.info("stats")["evicted_clients"])


MAXMEM_CLIENTS_VALUES = ["0", "1", "-1", "101%", "-1%", "5%", "1.5%", "abc", "%", "", "0%",
                         "100%", "1gb", "99999999999999999999", "9223372036854775807",
                         "9223372036854775808", "18446744073709551615", "18446744073709551616",
                         "10kb", "7 %", " 5%", "5 ", " 5", "1k", "0x10", "+5", "-0", "5%%",
                         "1gb%", "00005"]


def test_maxmemory_clients_config_same_as_redis(both):
    kv, ref = both
    b = kv.client()
    for v in MAXMEM_CLIENTS_VALUES:
        got = _call(b, "CONFIG", "SET", "maxmemory-clients", v)
        want = _call(ref, "CONFIG", "SET", "maxmemory-clients", v)
        assert got == want, v
        assert _get(b, "maxmemory-clients") == _get(ref, "maxmemory-clients"), v
    # a tiny limit leaves every client working (at least 128 KiB, as Redis)
    for c in (b, ref):
        c.config_set("maxmemory-clients", 1)
        extra = redis.Redis(port=_port(c))
        assert extra.ping() and extra.set("k", "v") and extra.get("k") == b"v"
        assert _info_evicted(c) == 0
        extra.close()
        c.config_set("maxmemory-clients", 0)


OOM_VALUES = ["10 20 30", "-2001 0 0", "0 0 2001", "1 2", "a b c", "1 2 3 4", "", "  5   6 7 ",
              "1  2", "+5 -0 3", "0x1 2 3", "99999999999999999999 0 0", "-2000 2000 0",
              "0 200 800"]


def test_oom_score_adj_config_same_as_redis(both):
    kv, ref = both
    b = kv.client()
    for v in OOM_VALUES:
        assert _call(b, "CONFIG", "SET", "oom-score-adj-values", v) == \
            _call(ref, "CONFIG", "SET", "oom-score-adj-values", v), v
        assert _get(b, "oom-score-adj-values") == _get(ref, "oom-score-adj-values"), v
    for v in ["bad", "", "YES", "no", "Relative", "absolute", "no"]:
        assert _call(b, "CONFIG", "SET", "oom-score-adj", v) == \
            _call(ref, "CONFIG", "SET", "oom-score-adj", v), v
        assert _get(b, "oom-score-adj") == _get(ref, "oom-score-adj"), v


def _oom(pid):
    with open(f"/proc/{pid}/oom_score_adj") as f:
        return int(f.read())


def _set_oom(pid, v):
    with open(f"/proc/{pid}/oom_score_adj", "w") as f:
        f.write(f"{v}\n")


def test_oom_score_adj_writes_proc(kv_factory):
    if not os.path.exists("/proc/self/oom_score_adj"):
        pytest.skip("no /proc/self/oom_score_adj")
    kv = kv_factory()
    c = kv.client(decode_responses=True)
    pid = int(c.info("server")["process_id"])
    base = _oom(pid)
    c.config_set("oom-score-adj-values", "10 20 30")
    c.config_set("oom-score-adj", "yes")
    assert _oom(pid) == base + 10
    c.config_set("oom-score-adj-values", "15 20 30")
    assert _oom(pid) == base + 15
    c.execute_command("REPLICAOF", "127.0.0.1", "1")
    assert _oom(pid) == base + 20
    c.execute_command("REPLICAOF", "NO", "ONE")
    assert _oom(pid) == base + 15
    c.config_set("oom-score-adj", "absolute")
    assert _oom(pid) == 15
    c.config_set("oom-score-adj", "no")
    assert _oom(pid) == base  # restored
    # off: the values do not touch /proc
    _set_oom(pid, base + 2)
    c.config_set("oom-score-adj-values", "1 1 1")
    assert _oom(pid) == base + 2
    # the background child gets the third value
    c.config_set("oom-score-adj-values", "0 0 33")
    c.config_set("oom-score-adj", "relative")
    c.set("a", "b")
    c.config_set("rdb-key-save-delay", "1000000")
    c.bgsave()
    deadline = time.time() + 5
    child = None
    while time.time() < deadline and child is None:
        for t in os.listdir(f"/proc/{pid}/task"):
            kids = open(f"/proc/{pid}/task/{t}/children").read().split()
            if kids:
                child = int(kids[0])
        time.sleep(0.02)
    assert child is not None
    deadline = time.time() + 5
    while time.time() < deadline and _oom(child) != base + 2 + 33:
        time.sleep(0.02)
    assert _oom(child) == base + 2 + 33
    c.config_set("rdb-key-save-delay", "0")
    os.kill(child, 9)


def test_oom_score_adj_failure_keeps_old_value(both):
    """Lowering the score needs CAP_SYS_RESOURCE: without it both refuse the
    same way and keep the old value (with it, both accept)."""
    kv, ref = both
    b = kv.client()
    for c in (b, ref):
        c.config_set("oom-score-adj", "no")
        c.config_set("oom-score-adj-values", "-1000 -1000 -1000")
    got, want = (_call(c, "CONFIG", "SET", "oom-score-adj", "yes") for c in (b, ref))
    assert got == want
    assert _get(b, "oom-score-adj") == _get(ref, "oom-score-adj")
    for c in (b, ref):
        c.config_set("oom-score-adj", "no")
        c.config_set("oom-score-adj-values", "0 200 800")


def _flood_query(port, n):
    """Announces a bulk of n bytes and sends it all but its CRLF."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$5\r\nflood\r\n")
    assert s.recv(100) == b"+OK\r\n"
    try:
        s.sendall(b"*2\r\n$%d\r\n" % n + b"v" * n)
    except OSError:
        pass
    return s


def _wait_gone(c, name, timeout=5.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if name not in _clients(c):
            return True
        time.sleep(0.02)
    return False


def _closed(s, timeout=5.0):
    s.settimeout(timeout)
    try:
        while True:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


@pytest.mark.parametrize("limit", ["1mb", "5%"])
def test_query_buffer_flood_is_evicted(both, limit):
    kv, ref = both
    for who, c in (("brisk-kv", kv.client()), ("redis", ref)):
        c.config_set("maxmemory", 20 * MB)
        c.config_set("maxmemory-clients", limit)
        c.client_no_evict("on")
        s = _flood_query(_port(c), 3 * MB)
        assert _closed(s), "the flooding client was not evicted"
        s.close()
        assert _wait_gone(c, "flood")
        assert _info_evicted(c) == 1
        assert c.ping()


def test_no_evict_client_stays(both):
    kv, ref = both
    for who, c in (("brisk-kv", kv.client()), ("redis", ref)):
        c.config_set("maxmemory-clients", "1mb")
        c.client_no_evict("on")
        s = socket.create_connection(("127.0.0.1", _port(c)))
        s.sendall(b"*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$4\r\nkeep\r\n"
                  b"*3\r\n$6\r\nCLIENT\r\n$8\r\nNO-EVICT\r\n$2\r\non\r\n")
        time.sleep(0.1)
        s.recv(100)
        n = 2 * MB
        s.sendall(b"*2\r\n$%d\r\n" % n + b"v" * n)
        deadline = time.time() + 5
        while time.time() < deadline and int(_clients(c)["keep"]["qbuf"]) < n:
            time.sleep(0.02)
        line = _clients(c)["keep"]
        assert int(line["qbuf"]) == n  # the bulk alone, as Redis shows it
        assert int(line["tot-mem"]) > MB
        assert "e" in line["flags"]
        assert _info_evicted(c) == 0
        # turning no-evict off lets it go
        s.sendall(b"\r\n*3\r\n$6\r\nCLIENT\r\n$8\r\nNO-EVICT\r\n$3\r\noff\r\n")
        assert _wait_gone(c, "keep")
        s.close()


def test_subscription_flood_is_evicted(both):
    kv, ref = both
    for who, c in (("brisk-kv", kv.client()), ("redis", ref)):
        c.config_set("maxmemory-clients", 200000)
        c.client_no_evict("on")
        for cmd in (b"PSUBSCRIBE", b"SUBSCRIBE", b"SSUBSCRIBE"):
            s = socket.create_connection(("127.0.0.1", _port(c)))
            batch = b"".join(b"*2\r\n$%d\r\n%s\r\n$12\r\n%012d\r\n" % (len(cmd), cmd, j)
                             for j in range(20000))
            try:
                s.sendall(batch)
            except OSError:
                pass
            assert _closed(s, 10), cmd
            s.close()
        assert _info_evicted(c) == 3
        assert c.ping()


def test_largest_evicted_first(both):
    kv, ref = both
    for who, c in (("brisk-kv", kv.client()), ("redis", ref)):
        c.client_setname("control")
        c.client_no_evict("on")
        socks = []
        for name, size in (("small", 64 * 1024), ("mid", 512 * 1024), ("big", 2 * MB)):
            s = socket.create_connection(("127.0.0.1", _port(c)))
            s.sendall(b"*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$%d\r\n%s\r\n"
                      % (len(name), name.encode()))
            s.recv(100)
            s.sendall(b"*2\r\n$%d\r\n" % size + b"v" * size)
            socks.append(s)
        time.sleep(0.3)
        mem = {k: int(v["tot-mem"]) for k, v in _clients(c).items()}
        # room for all but the biggest (and for the control client's reply
        # buffer, which grows with CLIENT LIST's reply in brisk-kv)
        c.config_set("maxmemory-clients", mem["small"] + mem["mid"] + mem["control"] + 32768)
        left = set(_clients(c))
        assert "big" not in left and {"small", "mid", "control"} <= left, (who, mem, left)
        assert _info_evicted(c) == 1, who
        for s in socks:
            s.close()


def test_multi_and_watch_count(both):
    kv, ref = both
    for who, c in (("brisk-kv", kv.client()), ("redis", ref)):
        c.config_set("maxmemory-clients", 3000000)
        rr = redis.Redis(port=_port(c), single_connection_client=True)
        rr.client_setname("m")
        rr.execute_command("MULTI")
        with pytest.raises(redis.ConnectionError):
            for _ in range(6):
                rr.execute_command("SET", "k", "v" * 750000)
        rr.close()
        assert _wait_gone(c, "m")
        w = redis.Redis(port=_port(c), single_connection_client=True)
        c.config_set("maxmemory-clients", 200000)
        with pytest.raises(redis.ConnectionError):
            for j in range(200000):
                w.execute_command("WATCH", str(j))
        w.close()
        assert _info_evicted(c) == 2
        c.config_set("maxmemory-clients", 0)


def test_output_buffer_growth_is_evicted(both):
    kv, ref = both
    for who, c in (("brisk-kv", kv.client()), ("redis", ref)):
        c.client_no_evict("on")
        c.setrange("k", 200000, "v")
        c.config_set("maxmemory-clients", 3000000)
        s = socket.create_connection(("127.0.0.1", _port(c)))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$4\r\nslow\r\n")
        assert s.recv(100) == b"+OK\r\n"
        deadline = time.time() + 10
        while time.time() < deadline and "slow" in _clients(c):
            try:
                s.sendall(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n" * 10)
            except OSError:
                break
            line = _clients(c).get("slow")
            if line:
                assert int(line["tot-mem"]) < 3000000 + 2 * MB
            time.sleep(0.01)
        assert "slow" not in _clients(c), who
        assert _info_evicted(c) == 1, who
        s.close()


def test_info_and_resetstat(r):
    r.config_set("maxmemory-clients", "1mb")
    r.client_no_evict("on")
    s = _flood_query(int(r.connection_pool.connection_kwargs["port"]), 2 * MB)
    assert _closed(s)
    s.close()
    assert int(r.info("stats")["evicted_clients"]) == 1
    r.config_resetstat()
    assert int(r.info("stats")["evicted_clients"]) == 0


def test_many_flooders_memory_bounded(kv_factory):
    """Twenty clients each announcing 64 MB arguments: all evicted, the
    server's RSS stays far from the announced 1.3 GB."""
    kv = kv_factory()
    c = kv.client(decode_responses=True)
    c.config_set("maxmemory-clients", "4mb")
    c.client_no_evict("on")
    socks = []
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", kv.port))
        s.sendall(b"*2\r\n$3\r\nSET\r\n$67108864\r\n" + b"v" * 200000)
        socks.append(s)
    for s in socks:
        assert _closed(s)
        s.close()
    assert int(c.info("stats")["evicted_clients"]) == 20
    pid = int(c.info("server")["process_id"])
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) * 1024
    assert rss < 200 * MB
    assert c.ping()
