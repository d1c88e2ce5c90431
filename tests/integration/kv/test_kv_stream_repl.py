"""Stream writes reach replicas as effects: a brisk-kv master (no AOF: the
effect commands are formatted only because a replica is fed) with a real
redis-server 7 replica and a brisk-kv replica attached; XADD with generated
IDs and approximate trimming, group reads, claims and acknowledgements on
the master; the replicas must hold the same entries, groups, consumers and
pending entries."""
from __future__ import annotations

import time

import pytest
import redis

from test_kv_replication import info, real, wait_for, wait_link_up  # noqa: F401  (real: fixture)


def stream_state(c: redis.Redis, key: str) -> dict:
    full = c.xinfo_stream(key, full=True)
    groups = []
    for g in full["groups"]:
        groups.append({
            "name": g["name"], "last-delivered-id": g["last-delivered-id"],
            "entries-read": g["entries-read"], "lag": g["lag"], "pel-count": g["pel-count"],
            "pending": [(p[0], p[2]) for p in g["pending"]],  # id, delivery count
            "consumers": sorted((x["name"], x["pel-count"], tuple(p[0] for p in x["pending"]))
                                for x in g["consumers"]),
        })
    return {"entries": c.xrange(key), "length": full["length"],
            "last-generated-id": full["last-generated-id"],
            "max-deleted-entry-id": full["max-deleted-entry-id"],
            "entries-added": full["entries-added"], "groups": groups}


@pytest.mark.timeout(90)
def test_stream_effects_reach_replicas(kv_factory, real):
    m = kv_factory("--repl-diskless-sync-delay", "0")
    mc = m.client(decode_responses=True)
    rr = real()
    rc = redis.Redis(host="127.0.0.1", port=rr.port, decode_responses=True)
    br = kv_factory()
    bc = br.client(decode_responses=True)
    for c in (rc, bc):
        c.execute_command("REPLICAOF", "127.0.0.1", m.port)
        wait_link_up(c)
    mc.config_set("stream-node-max-entries", "10")
    for i in range(200):
        mc.xadd("s", {"n": str(i), "k": "x"}, maxlen=150, approximate=True)
    mc.xadd("s", {"n": "exact"}, id="99999999999999-*")
    mc.xgroup_create("s", "g", id="0")
    mc.xreadgroup("g", "alice", {"s": ">"}, count=30)
    mc.xreadgroup("g", "bob", {"s": ">"}, count=5, noack=True)
    ids = [e[0] for e in mc.xrange("s", count=60)]
    mc.xack("s", "g", *ids[:10])
    mc.xdel("s", ids[12], ids[13])
    time.sleep(0.02)
    mc.xclaim("s", "g", "carol", 0, ids[10:12])
    mc.xautoclaim("s", "g", "dave", 0, start_id="0-0", count=5)
    mc.xgroup_setid("s", "g", id=ids[40], entries_read=40)
    mc.xtrim("s", minid=ids[20], approximate=False)
    mc.xgroup_createconsumer("s", "g", "erin")
    mc.set("final", "1")
    want = stream_state(mc, "s")
    for c in (rc, bc):
        wait_for(lambda c=c: c.get("final") == "1", 30, "the replica caught up")
        assert stream_state(c, "s") == want
