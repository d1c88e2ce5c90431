"""Expiry (lazy and active), maxmemory eviction and OOM errors, and the
client output buffer limit."""
from __future__ import annotations

import socket
import time

import pytest
import redis


def test_lazy_expiry(r):
    r.set("k", "v", px=100)
    assert r.get("k") == "v"
    time.sleep(0.15)
    assert r.get("k") is None
    assert r.exists("k") == 0
    assert r.info("stats")["expired_keys"] >= 1


def test_active_expiry_removes_unaccessed_keys(r):
    p = r.pipeline(transaction=False)
    for i in range(2000):
        p.set(f"tmp:{i}", "x", px=200)
    for i in range(100):
        p.set(f"keep:{i}", "y")
    p.execute()
    assert r.dbsize() == 2100
    deadline = time.time() + 10
    while time.time() < deadline and r.dbsize() > 100:
        time.sleep(0.1)
    # keys were removed without being touched
    assert r.dbsize() == 100
    assert r.info("stats")["expired_keys"] >= 2000
    assert r.info("keyspace")["db0"]["expires"] == 0


def test_noeviction_refuses_writes(kv_factory):
    kv = kv_factory("--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
    c = kv.client()
    with pytest.raises(redis.ResponseError) as e:
        for i in range(100000):
            c.set(f"key:{i}", "x" * 100)
    # redis-py drops the "OOM " code from the message
    assert isinstance(e.value, redis.exceptions.OutOfMemoryError)
    assert str(e.value) == "command not allowed when used memory > 'maxmemory'."
    assert c.get("key:0") is not None  # reads still work
    assert c.delete("key:0") == 1      # and deletes


@pytest.mark.parametrize("policy", ["allkeys-lru", "allkeys-random"])
def test_allkeys_eviction_keeps_memory_bounded(kv_factory, policy):
    kv = kv_factory("--maxmemory", "4mb", "--maxmemory-policy", policy)
    c = kv.client()
    p = c.pipeline(transaction=False)
    for i in range(60000):
        p.set(f"key:{i}", "x" * 100)
        if i % 1000 == 999:
            p.execute()
    p.execute()
    info = c.info()
    assert info["evicted_keys"] > 0
    assert info["used_memory_dataset"] <= 4 * 1024 * 1024 + 64 * 1024
    assert c.dbsize() < 60000


def test_allkeys_lru_prefers_old_keys(kv_factory):
    kv = kv_factory("--maxmemory", "3mb", "--maxmemory-policy", "allkeys-lru",
                    "--maxmemory-samples", "10")
    c = kv.client()
    c.set("hot", "x" * 100)
    p = c.pipeline(transaction=False)
    for i in range(40000):
        p.set(f"key:{i}", "x" * 100)
        if i % 1000 == 999:
            p.get("hot")  # hot stays recently used
            p.execute()
            time.sleep(0.011)  # let the LRU clock tick between batches
    p.execute()
    assert c.info()["evicted_keys"] > 0
    assert c.get("hot") is not None


def test_volatile_lru_only_evicts_keys_with_ttl(kv_factory):
    kv = kv_factory("--maxmemory", "3mb", "--maxmemory-policy", "volatile-lru")
    c = kv.client()
    for i in range(200):
        c.set(f"perm:{i}", "p")
    p = c.pipeline(transaction=False)
    for i in range(30000):
        p.set(f"vol:{i}", "x" * 100, ex=3600)
        if i % 1000 == 999:
            p.execute()
    p.execute()
    assert c.info()["evicted_keys"] > 0
    assert all(c.get(f"perm:{i}") == b"p" for i in range(200))


def test_output_buffer_limit_disconnects_a_client_that_never_reads(kv_factory):
    kv = kv_factory("--client-output-buffer-limit", "normal", "1mb", "0", "0")
    c = kv.client()
    c.set("big", "x" * 100000)
    s = socket.create_connection(("127.0.0.1", kv.port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    req = b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n" * 200  # 20 MB of replies
    try:
        for _ in range(5):
            s.sendall(req)
    except OSError:
        pass
    deadline = time.time() + 10
    closed = False
    while time.time() < deadline:
        lst = c.client_list()
        if len(lst) == 1:
            closed = True
            break
        time.sleep(0.05)
    s.close()
    assert closed, "the non-reading client was not disconnected"
    assert c.ping()
