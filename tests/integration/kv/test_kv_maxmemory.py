"""maxmemory as Redis 7.0.15 enforces it, side by side with a real redis-server:
used_memory counts the clients' buffers and stays within maxmemory after every
write, replicas' output buffers are left out of eviction (mem_not_counted_for_evict,
mem_clients_slaves), CONFIG SET maxmemory inside EXEC does not refuse the queue,
output buffer limits (soft limit with no traffic, a random-count reply stopped
mid-run) and the reply buffer of CLIENT LIST (rbs, DEBUG REPLYBUFFER)."""
from __future__ import annotations

import socket
import time

import pytest
import redis

from kvlib import on_both as _on_both


def _mem(c, field):
    return int(c.info("memory")[field]) if field in c.info("memory") else None


def _used(c):
    return int(c.info("memory")["used_memory"])


@pytest.mark.parametrize("policy", ["allkeys-lru", "allkeys-random", "volatile-ttl"])
def test_limit_honoured_after_each_write(kv_factory, tmp_path, policy):
    def run(c, port):
        # (Redis allocates a latency histogram per command on its first call)
        c.config_set("latency-tracking", "no")
        c.setex("warm", 1, "x")
        c.flushall()
        limit = _used(c) + 100 * 1024
        c.config_set("maxmemory", limit)
        c.config_set("maxmemory-policy", policy)
        n = 0
        while True:
            c.setex(f"key:{n}", 10000, "x")
            n += 1
            if _used(c) + 4096 > limit:
                break
        for j in range(n):
            c.setex(f"more:{j}", 10000, "x")
        return n > 10, _used(c) < limit + 4096, int(c.info("stats")["evicted_keys"]) > 0
    mine, theirs = _on_both(kv_factory, tmp_path, run)
    assert mine == theirs == (True, True, True)


def test_client_output_buffers_cause_eviction(kv_factory, tmp_path):
    """Clients that do not read their MGET replies make used_memory grow:
    keys are evicted for it."""
    def run(c, port):
        for j in range(20):
            c.setrange(str(j), 100000, "x")
        c.config_set("maxmemory-policy", "allkeys-lru")
        c.config_set("maxmemory", _used(c) + 2 * 1024 * 1024)
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(10)]
        for s in socks:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        deadline = time.time() + 20
        try:
            while int(c.info("stats")["evicted_keys"]) == 0 and time.time() < deadline:
                for s in socks:
                    s.sendall(b"MGET 1 2\r\n")
        finally:
            for s in socks:
                s.close()
        return int(c.info("stats")["evicted_keys"]) > 0, c.dbsize() < 20
    mine, theirs = _on_both(kv_factory, tmp_path, run)
    assert mine == theirs == (True, True)


def test_maxmemory_set_inside_exec(kv_factory, tmp_path):
    """The queue runs whole (EXEC passed the check), the key goes after."""
    def run(c, port):
        c.config_set("maxmemory-policy", "allkeys-lru")
        p = c.pipeline(transaction=True)
        p.incr("x")
        p.config_set("maxmemory", 1)
        p.incr("x")
        got = p.execute()
        deadline = time.time() + 5
        while c.dbsize() and time.time() < deadline:
            time.sleep(0.01)
        size = c.dbsize()
        c.config_set("maxmemory", 0)
        return got, size
    mine, theirs = _on_both(kv_factory, tmp_path, run)
    assert mine == theirs == ([1, True, 2], 0)


def _fake_replica(port):
    """A replica that asks for a full sync and then reads nothing."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"REPLCONF capa eof capa psync2\r\n")
    assert s.recv(5) == b"+OK\r\n"  # (PSYNC with a reply pending is refused)
    s.sendall(b"PSYNC ? -1\r\n")
    return s


def test_replica_buffers_not_counted_for_eviction(kv_factory, tmp_path):
    def run(c, port):
        for j in range(20):
            c.setrange(f"key:{j}", 100000, "asdf")
        c.config_set("client-output-buffer-limit", "replica 100000000 100000000 300")
        c.config_set("maxmemory-policy", "allkeys-random")
        # (Redis's backlog shares the replicas' buffer: until it holds
        # repl-backlog-size bytes, what they are sent counts as used memory)
        c.config_set("repl-backlog-size", 10240)
        r = _fake_replica(port)
        try:
            deadline = time.time() + 10
            while "slave0" not in c.info("replication") and time.time() < deadline:
                time.sleep(0.05)
            time.sleep(0.5)
            info = c.info("memory")
            c.config_set("maxmemory", info["used_memory"] - info["mem_not_counted_for_evict"]
                         + 64 * 1024)
            p = c.pipeline(transaction=False)
            for _ in range(12000):
                p.setrange("key:0", 0, "A" * 1000)
            p.execute()
            info = c.info("memory")
            grown = (info["mem_clients_slaves"] > 2 * 1024 * 1024,
                     info["mem_not_counted_for_evict"] > 2 * 1024 * 1024,
                     c.dbsize())
            # a killed replica's buffer is gone at once: no eviction for it
            c.client_kill_filter(_type="slave")
            after = (c.dbsize(), int(c.info("stats")["evicted_keys"]),
                     _mem(c, "mem_clients_slaves"))
            return grown, after
        finally:
            r.close()
            c.config_set("maxmemory", 0)
    mine, theirs = _on_both(kv_factory, tmp_path, run, "--repl-diskless-sync", "no")
    assert mine == theirs == ((True, True, 20), (20, 0, 0))


def test_new_string_by_setrange_is_allocated_to_size(kv_factory, tmp_path):
    def run(c, port):
        c.config_set("latency-tracking", "no")
        c.setrange("warm", 1, "x")
        c.delete("warm")
        before = _used(c)
        c.setrange("k", 100000, "x")
        grew = _used(c) - before
        return 100000 < grew < 150000
    mine, theirs = _on_both(kv_factory, tmp_path, run)
    assert mine == theirs == True  # noqa: E712


def _omem(c, name):
    for x in c.client_list():
        if x["name"] == name:
            return int(x["omem"])
    return None


def test_soft_limit_closes_a_client_without_traffic(kv_factory, tmp_path):
    def run(c, port):
        c.config_set("client-output-buffer-limit", "pubsub 0 100000 2")
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"CLIENT SETNAME soft\r\nSUBSCRIBE foo\r\n")
        time.sleep(0.2)
        try:
            deadline = time.time() + 10
            while (_omem(c, "soft") or 0) <= 100000 and time.time() < deadline:
                c.publish("foo", "x" * 1000)
            over = _omem(c, "soft") is not None
            # no more traffic: the soft limit's time still runs out
            deadline = time.time() + 6
            while _omem(c, "soft") is not None and time.time() < deadline:
                time.sleep(0.05)
            return over, _omem(c, "soft") is None
        finally:
            s.close()
    mine, theirs = _on_both(kv_factory, tmp_path, run)
    assert mine == theirs == (True, True)


@pytest.mark.parametrize("cmd", [("HRANDFIELD", "h"), ("SRANDMEMBER", "s"),
                                 ("ZRANDMEMBER", "z")])
def test_huge_random_count_stopped_by_output_limit(kv_factory, tmp_path, cmd):
    def run(c, port):
        c.hset("h", "a", "b")
        c.sadd("s", "a")
        c.zadd("z", {"a": 1})
        c.config_set("client-output-buffer-limit", "normal 1000000 0 0")
        d = redis.Redis(port=port, socket_timeout=30)
        try:
            d.execute_command(cmd[0], cmd[1], -999999999)
            got = "reply"
        except redis.ConnectionError:
            got = "closed"
        finally:
            d.close()
        return got, c.ping()
    mine, theirs = _on_both(kv_factory, tmp_path, run)
    assert mine == theirs == ("closed", True)


def _rbs(c, name):
    for x in c.client_list():
        if x["name"] == name:
            return int(x["rbs"])
    return None


def test_reply_buffer_resizing(kv_factory, tmp_path):
    def run(c, port):
        c.execute_command("DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "100")
        tc = redis.Redis(port=port, decode_responses=True)
        tc.client_setname("rbtest")
        start = _rbs(c, "rbtest")
        deadline = time.time() + 3
        while not 1024 <= _rbs(c, "rbtest") < 2046 and time.time() < deadline:
            time.sleep(0.1)
        idle = _rbs(c, "rbtest")
        c.set("big", "x" * 32768)
        c.execute_command("DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "never")
        deadline = time.time() + 5
        while not 16384 <= _rbs(c, "rbtest") < 32768 and time.time() < deadline:
            tc.get("big")
            time.sleep(0.05)
        busy = _rbs(c, "rbtest")
        stats = c.info("stats")
        errs = []
        for args in (("PEAK-RESET-TIME", "soon"), ("BOGUS", "1")):
            try:
                c.execute_command("DEBUG", "REPLYBUFFER", *args)
                errs.append("OK")
            except redis.ResponseError as e:
                errs.append(str(e))
        c.execute_command("DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "reset")
        c.execute_command("DEBUG", "REPLYBUFFER", "RESIZING", "0")
        tc.close()
        return (start == 16384, 1024 <= idle < 2046, 16384 <= busy < 32768,
                int(stats["reply_buffer_shrinks"]) > 0, int(stats["reply_buffer_expands"]) > 0,
                errs)
    mine, theirs = _on_both(kv_factory, tmp_path, run)
    assert mine == theirs
    assert mine[:5] == (True,) * 5


def test_large_bulks_in_multi_under_maxmemory_clients(kv_factory, tmp_path):
    """Two 750 KB SETs queued under maxmemory-clients 3000000 fit (Redis's
    unit/client-eviction "large multi buf"): the few bytes of a bulk left
    after a read that filled the query buffer must not double it."""
    def run(c, port):
        c.config_set("maxmemory-clients", 3000000)
        rr = redis.Redis(port=port, socket_timeout=10)
        got = []
        try:
            for _ in range(3):
                p = rr.pipeline(transaction=True)
                p.set("k", "v" * 750000)
                p.set("k", "v" * 750000)
                got.append(p.execute())
        except redis.ConnectionError:
            got.append("evicted")
        finally:
            rr.close()
        return got, int(c.info("stats")["evicted_clients"])
    mine, theirs = _on_both(kv_factory, tmp_path, run)
    assert mine == theirs == ([[True, True]] * 3, 0)
