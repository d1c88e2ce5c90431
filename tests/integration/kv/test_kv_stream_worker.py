"""A consumer-group work queue written with redis-py's own stream API,
unchanged, run against brisk-kv and a real redis-server 7 side by side:
workers in an XREADGROUP BLOCK loop acknowledging with XACK, a consumer that
dies holding pending entries, a janitor taking those over with XAUTOCLAIM,
XPENDING checked at each stage. Every observation that does not depend on
thread timing (what was processed, the PEL, delivery counts, the group and
consumer state) must be equal on both servers."""
from __future__ import annotations

import threading
import time

import redis

STREAM, GROUP = "jobs", "workers"
FIRST, LATE, DEAD_TAKES = 120, 40, 25


def _client(port: int) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port, decode_responses=True, socket_timeout=20)


def _pending_view(c: redis.Redis, consumer: str | None = None) -> list[tuple]:
    """XPENDING's extended form without the idle times (clock dependent)."""
    rows = c.xpending_range(STREAM, GROUP, min="-", max="+", count=1000,
                            consumername=consumer)
    return [(r["message_id"], r["consumer"], r["times_delivered"]) for r in rows]


def _summary(c: redis.Redis) -> dict:
    s = c.xpending(STREAM, GROUP)
    return {"pending": s["pending"], "min": s["min"], "max": s["max"],
            "consumers": sorted((x["name"], x["pending"]) for x in s["consumers"])}


def _worker(port: int, name: str, done: threading.Event, seen: list, lock: threading.Lock):
    """The usual worker: block for new entries, handle, acknowledge."""
    c = _client(port)
    while True:
        resp = c.xreadgroup(GROUP, name, {STREAM: ">"}, count=5, block=100)
        if not resp:
            if done.is_set():
                break
            continue
        for _stream, msgs in resp:
            for mid, fields in msgs:
                with lock:
                    seen.append((mid, fields["job"], name))
                assert c.xack(STREAM, GROUP, mid) == 1
    c.close()


def _scenario(port: int) -> dict:
    obs: dict = {}
    c = _client(port)
    c.delete(STREAM)
    obs["create"] = c.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    for i in range(FIRST):
        c.xadd(STREAM, {"job": str(i), "kind": "a" if i % 3 else "b"}, id=f"{1000 + i}-0")

    # A consumer takes entries and dies without acknowledging them.
    dead = c.xreadgroup(GROUP, "dead", {STREAM: ">"}, count=DEAD_TAKES)
    obs["dead_read"] = dead
    obs["pending_after_dead"] = _summary(c)
    obs["dead_pel"] = _pending_view(c, "dead")
    # Two of its entries are deleted meanwhile (XAUTOCLAIM reports them).
    obs["xdel"] = c.xdel(STREAM, "1003-0", "1010-0")

    # Workers drain the rest, blocking; the producer adds more while they wait.
    seen: list = []
    lock = threading.Lock()
    done = threading.Event()
    threads = [threading.Thread(target=_worker, args=(port, f"w{i}", done, seen, lock))
               for i in range(2)]
    for t in threads:
        t.start()
    deadline = time.time() + 20
    while True:
        with lock:
            n = len(seen)
        if n >= FIRST - DEAD_TAKES:
            break
        assert time.time() < deadline, f"workers processed {n}"
        time.sleep(0.01)
    time.sleep(0.2)  # the workers are parked in XREADGROUP BLOCK now
    for i in range(LATE):
        c.xadd(STREAM, {"job": str(FIRST + i), "kind": "late"}, id=f"{2000 + i}-0")
    while True:
        with lock:
            n = len(seen)
        if n >= FIRST - DEAD_TAKES + LATE:
            break
        assert time.time() < deadline, f"workers processed {n}"
        time.sleep(0.01)
    done.set()
    for t in threads:
        t.join()
    obs["workers_processed"] = sorted((mid, job) for mid, job, _ in seen)
    obs["pending_after_workers"] = _summary(c)

    # The janitor takes over what the dead consumer holds, page by page.
    time.sleep(0.06)
    j = _client(port)
    cursor, pages = "0-0", []
    while True:
        nxt, claimed, deleted = j.xautoclaim(STREAM, GROUP, "janitor", min_idle_time=50,
                                             start_id=cursor, count=7)
        pages.append((nxt, claimed, deleted))
        for mid, fields in claimed:
            if fields["job"] != "5":  # job 5 stays pending with the janitor
                assert j.xack(STREAM, GROUP, mid) == 1
        cursor = nxt
        if cursor == "0-0":
            break
    obs["autoclaim_pages"] = pages
    obs["janitor_pel"] = _pending_view(j, "janitor")  # job 5: claimed, not acked
    # Nothing left idle long enough: an immediate second pass claims nothing.
    obs["autoclaim_again"] = j.xautoclaim(STREAM, GROUP, "janitor", min_idle_time=60000,
                                          start_id="0-0")
    obs["ack_last"] = j.xack(STREAM, GROUP, *[m for m, _, _ in obs["janitor_pel"]])
    obs["pending_end"] = _summary(j)
    obs["pending_range_end"] = _pending_view(j)
    groups = j.xinfo_groups(STREAM)
    obs["groups"] = [{k: g[k] for k in ("name", "consumers", "pending", "last-delivered-id",
                                         "entries-read", "lag")} for g in groups]
    obs["consumers"] = sorted((x["name"], x["pending"]) for x in j.xinfo_consumers(STREAM, GROUP))
    obs["delconsumer"] = j.xgroup_delconsumer(STREAM, GROUP, "dead")
    obs["len"] = j.xlen(STREAM)
    j.close()
    c.close()
    return obs


def test_redis_py_consumer_group_worker_matches_redis(kv, reference):
    ref_port = reference.connection_pool.connection_kwargs["port"]
    want = _scenario(ref_port)
    got = _scenario(kv.port)
    for k in want:
        assert got[k] == want[k], f"{k}: redis {want[k]!r} brisk {got[k]!r}"
    # the scenario did what it says
    assert len(want["workers_processed"]) == FIRST - DEAD_TAKES + LATE
    assert want["pending_after_dead"]["pending"] == DEAD_TAKES
    assert any(p[2] for p in want["autoclaim_pages"])  # deleted IDs reported
    assert want["pending_end"]["pending"] == 0
    assert want["janitor_pel"] == [("1005-0", "janitor", 2)]
