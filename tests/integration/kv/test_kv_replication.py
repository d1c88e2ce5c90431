"""Replication between brisk-kv and real Redis 7.0 (both directions),
partial resync from the backlog, WAIT, read-only replicas, chaining,
min-replicas-to-write, and a Sentinel failover of brisk-kv nodes.

Real redis-server (and redis-server --sentinel) processes run on free
loopback ports in the test's temporary directory."""
from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis
from redis.sentinel import Sentinel

from kvlib import free_port, no_sync_delay

REDIS_SERVER = shutil.which("redis-server")
pytestmark = pytest.mark.skipif(not REDIS_SERVER, reason="redis-server is not installed")

NKEYS = int(os.environ.get("KV_REPL_KEYS", "100000"))


class RealRedis:
    def __init__(self, workdir: Path, *args: str, sentinel_conf: str | None = None):
        self.port = free_port()
        self.dir = Path(workdir) / f"redis-{self.port}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.args = list(args)
        self.sentinel_conf = sentinel_conf
        self.log_path = self.dir / "redis.log"
        self.proc = None

    def start(self):
        if self.sentinel_conf is not None:
            conf = self.dir / "sentinel.conf"
            if not conf.exists():
                conf.write_text(f"port {self.port}\n{self.sentinel_conf}")
            cmd = [REDIS_SERVER, str(conf), "--sentinel", "--dir", str(self.dir),
                   "--logfile", str(self.log_path)]
        else:
            cmd = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
                   "--save", "", "--appendonly", "no", "--dir", str(self.dir),
                   "--logfile", str(self.log_path), *no_sync_delay([], self.args), *self.args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        c = self.client()
        deadline = time.time() + 10
        while True:
            try:
                c.ping()
                break
            except redis.ConnectionError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        return self

    def client(self, **kw):
        kw.setdefault("socket_timeout", 20)
        return redis.Redis(host="127.0.0.1", port=self.port, **kw)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@pytest.fixture
def real(tmp_path):
    started: list[RealRedis] = []

    def make(*args: str, sentinel_conf: str | None = None, start: bool = True) -> RealRedis:
        s = RealRedis(tmp_path, *args, sentinel_conf=sentinel_conf)
        started.append(s)
        if start:
            s.start()
        return s

    yield make
    for s in started:
        s.stop(signal.SIGKILL)


def wait_for(pred, timeout=30.0, what="condition"):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = pred()
            if last:
                return last
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError) as e:
            last = e
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def info(c, section="replication") -> dict:
    return c.info(section)


def wait_link_up(replica):
    wait_for(lambda: info(replica).get("master_link_status") == "up", 60, "master link up")


def wait_same_offset(master, *replicas, timeout=30):
    def same():
        off = info(master)["master_repl_offset"]
        return all(info(r)["master_repl_offset"] == off for r in replicas)
    wait_for(same, timeout, "replicas at the master's offset")


def populate(c, n: int, seed: int = 1, prefix: str = "k"):
    """n keys of every type (strings, ints, lists, sets of ints and
    strings, sorted sets, hashes, some with a TTL) in db 0 and db 9."""
    rnd = random.Random(seed)
    p = c.pipeline(transaction=False)
    for i in range(n):
        k = f"{prefix}:{i}"
        kind = i % 8
        if kind == 0:
            p.set(k, "v" * rnd.randint(0, 40) + str(i))
        elif kind == 1:
            p.set(k, rnd.randint(-10**12, 10**12))
        elif kind == 2:
            p.rpush(k, *[f"e{j}" for j in range(rnd.randint(1, 12))])
        elif kind == 3:
            p.sadd(k, *[rnd.randint(0, 1000) for _ in range(rnd.randint(1, 10))])
        elif kind == 4:
            p.sadd(k, *[f"m{rnd.randint(0, 10**6)}" for _ in range(rnd.randint(1, 10))])
        elif kind == 5:
            p.zadd(k, {f"z{j}": rnd.random() * 100 for j in range(rnd.randint(1, 10))})
        elif kind == 6:
            p.hset(k, mapping={f"f{j}": f"{j * i}" for j in range(rnd.randint(1, 10))})
        else:
            p.set(k, f"ttl{i}", ex=3600)
        if i % 1000 == 999:
            p.execute()
    p.execute()
    p.select(9) if False else None
    c.execute_command("SELECT", 9)
    c.set("db9-key", "in db 9")
    c.lpush("db9-list", *range(300))  # a list past the listpack size
    c.zadd("db9-zset", {f"m{j}": j for j in range(200)})  # a skiplist
    c.hset("db9-hash", mapping={f"f{j}": "x" * 80 for j in range(10)})  # a hashtable
    c.execute_command("SELECT", 0)


def snapshot(c, db: int) -> dict:
    """Every key of db with its type, value and whether it has a TTL."""
    c.execute_command("SELECT", db)
    keys = []
    cursor = 0
    while True:
        cursor, batch = c.scan(cursor, count=5000)
        keys.extend(batch)
        if cursor == 0:
            break
    out = {}
    for start in range(0, len(keys), 2000):
        chunk = keys[start:start + 2000]
        p = c.pipeline(transaction=False)
        for k in chunk:
            p.type(k)
        types = p.execute()
        p = c.pipeline(transaction=False)
        for k, t in zip(chunk, types):
            t = t.decode() if isinstance(t, bytes) else t
            if t == "string":
                p.get(k)
            elif t == "list":
                p.lrange(k, 0, -1)
            elif t == "set":
                p.smembers(k)
            elif t == "zset":
                p.zrange(k, 0, -1, withscores=True)
            elif t == "hash":
                p.hgetall(k)
            else:
                p.type(k)
            p.ttl(k)
        vals = p.execute()
        for i, k in enumerate(chunk):
            v, ttl = vals[2 * i], vals[2 * i + 1]
            if types[i] in (b"none", "none"):
                continue  # expired between SCAN and TYPE
            if isinstance(v, set):
                v = sorted(v)
            out[k] = (types[i], v, ttl > 0)
    c.execute_command("SELECT", 0)
    return out


def assert_same_data(a, b, dbs=(0, 9)):
    for db in dbs:
        sa, sb = snapshot(a, db), snapshot(b, db)
        assert len(sa) == len(sb), (db, len(sa), len(sb))
        diff = [k for k in sa if sa[k] != sb.get(k)]
        assert not diff, (db, diff[:5], [(sa[k], sb.get(k)) for k in diff[:3]])


def write_load(c, seconds: float, seed: int = 7):
    """Mixed writes for a while: overwrites, list pushes, hash sets,
    deletes, counters, short TTLs that expire on the master, MULTI/EXEC."""
    rnd = random.Random(seed)
    end = time.time() + seconds
    n = 0
    while time.time() < end:
        p = c.pipeline(transaction=False)
        for _ in range(200):
            i = rnd.randint(0, NKEYS - 1)
            op = rnd.randint(0, 7)
            if op == 0:
                p.set(f"load:{i}", rnd.random())
            elif op == 1:
                p.incrby("load:counter", rnd.randint(1, 10))
            elif op == 2:
                p.rpush(f"load:list:{i % 50}", i)
            elif op == 3:
                p.hset(f"load:hash:{i % 50}", f"f{i}", i)
            elif op == 4:
                p.delete(f"k:{i}")
            elif op == 5:
                p.set(f"load:short:{i}", 1, px=rnd.randint(1, 300))
            elif op == 6:
                p.zincrby("load:zset", 1, f"m{i % 100}")
            else:
                p.sadd(f"load:set:{i % 20}", i)
        p.execute()
        with c.pipeline(transaction=True) as t:
            t.incr("load:tx")
            t.lpush("load:txlist", n)
            t.execute()
        n += 1
    return n


def replicate(replica, master_port):
    replica.execute_command("REPLICAOF", "127.0.0.1", master_port)


# ---- both directions with real Redis ----


@pytest.mark.timeout(90)
def test_brisk_master_real_replica_converges(kv_factory, real):
    m = kv_factory("--repl-diskless-sync-delay", "0")
    mc = m.client()
    populate(mc, NKEYS)
    rr = real()
    rc = rr.client()
    replicate(rc, m.port)
    wait_link_up(rc)
    write_load(mc, 3)
    # keys with a short TTL expire on the master, which sends DEL
    time.sleep(0.5)
    mc.set("final", "1")
    wait_same_offset(mc, rc)
    assert_same_data(mc, rc)
    assert mc.dbsize() == rc.dbsize()
    assert info(mc)["connected_slaves"] == 1
    assert info(mc)["slave0"]["state"] == "online"


@pytest.mark.timeout(90)
def test_real_master_brisk_replica_converges(kv_factory, real):
    rm = real("--repl-diskless-sync-delay", "0")
    mc = rm.client()
    populate(mc, NKEYS)
    r = kv_factory()
    rc = r.client()
    replicate(rc, rm.port)
    wait_link_up(rc)
    write_load(mc, 3)
    time.sleep(0.5)
    mc.set("final", "1")
    wait_same_offset(mc, rc)
    assert_same_data(mc, rc)
    ri = info(rc)
    assert ri["role"] == "slave" and ri["master_port"] == rm.port
    assert ri["master_replid"] == info(mc)["master_replid"]
    role = rc.execute_command("ROLE")
    assert role[0] == b"slave" and role[1] == b"127.0.0.1" and role[2] == rm.port
    assert role[3] == b"connected" and role[4] == info(mc)["master_repl_offset"]


@pytest.mark.timeout(90)
def test_disk_backed_sync_between_brisk_nodes(kv_factory):
    m = kv_factory("--repl-diskless-sync", "no")
    mc = m.client()
    populate(mc, 5000)
    r = kv_factory()
    rc = r.client()
    replicate(rc, m.port)
    wait_link_up(rc)
    mc.set("after", "sync")
    wait_same_offset(mc, rc)
    assert_same_data(mc, rc)


@pytest.mark.timeout(90)
def test_replica_does_not_expire_keys_itself(kv_factory, real):
    rm = real("--repl-diskless-sync-delay", "0", "--hz", "1")
    mc = rm.client()
    r = kv_factory()
    rc = r.client(decode_responses=True)
    replicate(rc, rm.port)
    wait_link_up(rc)
    mc.set("soon", "x", px=200)
    wait_same_offset(mc, rc)
    time.sleep(0.4)
    # logically expired on the replica, but still stored until the DEL
    assert rc.get("soon") is None
    assert rc.dbsize() == 1
    mc.get("soon")  # the master expires it and sends DEL
    wait_for(lambda: rc.dbsize() == 0, 5, "DEL from the master")


# ---- partial resync ----


@pytest.mark.timeout(90)
def test_real_replica_restart_continues_from_backlog(kv_factory, real):
    m = kv_factory("--repl-diskless-sync-delay", "0")
    mc = m.client()
    populate(mc, 2000)
    rr = real("--save", "3600 1")
    rc = rr.client()
    replicate(rc, m.port)
    wait_link_up(rc)
    mc.set("before", "1")
    wait_same_offset(mc, rc)
    rr.stop()  # SIGTERM: saves its RDB with the replication id and offset
    mc.set("while-down", "1")
    mc.incr("counter")
    rr.args = ["--save", "3600 1", "--replicaof", "127.0.0.1", str(m.port)]
    rr.start()
    rc = rr.client()
    wait_link_up(rc)
    wait_same_offset(mc, rc)
    assert rc.get("while-down") == b"1"
    st = info(mc, "stats")
    assert st["sync_partial_ok"] == 1, st
    assert st["sync_full"] == 1
    assert "Successful partial resynchronization" in rr.log()


@pytest.mark.timeout(90)
def test_brisk_replica_link_drop_continues(kv_factory, real):
    rm = real("--repl-diskless-sync-delay", "0")
    mc = rm.client()
    populate(mc, 1000)
    r = kv_factory()
    rc = r.client()
    replicate(rc, rm.port)
    wait_link_up(rc)
    rc.execute_command("CLIENT", "KILL", "TYPE", "master")
    mc.set("gap", "1")
    wait_link_up(rc)
    wait_same_offset(mc, rc)
    assert rc.get("gap") == b"1"
    st = info(mc, "stats")
    assert st["sync_partial_ok"] == 1 and st["sync_full"] == 1, st
    assert_same_data(mc, rc)


# ---- WAIT, read-only, min-replicas ----


@pytest.mark.timeout(90)
def test_wait(kv_factory):
    m = kv_factory("--repl-diskless-sync-delay", "0")
    mc = m.client()
    reps = [kv_factory() for _ in range(2)]
    for r in reps:
        replicate(r.client(), m.port)
    for r in reps:
        wait_link_up(r.client())
    mc.set("w", "1")
    assert mc.execute_command("WAIT", 2, 5000) == 2
    t0 = time.time()
    assert mc.execute_command("WAIT", 3, 300) == 2
    assert 0.25 < time.time() - t0 < 3
    # commands pipelined behind a blocked WAIT run after it replies
    p = mc.pipeline(transaction=False)
    p.set("w2", "2").execute_command("WAIT", 3, 200).get("w2")
    assert p.execute() == [True, 2, b"2"]
    with pytest.raises(redis.ResponseError, match="WAIT cannot be used with replica instances"):
        reps[0].client().execute_command("WAIT", 1, 0)
    with pytest.raises(redis.ResponseError, match="timeout is negative"):
        mc.execute_command("WAIT", 1, -1)


@pytest.mark.timeout(90)
def test_read_only_replica_matches_redis(kv_factory, real):
    m = kv_factory("--repl-diskless-sync-delay", "0")
    r = kv_factory()
    rr = real()
    for c in (r.client(), rr.client()):
        replicate(c, m.port)
    for c in (r.client(), rr.client()):
        wait_link_up(c)
    errs = []
    for c in (r.client(), rr.client()):
        with pytest.raises(redis.ResponseError) as e:
            c.set("x", 1)
        errs.append(str(e.value))
        t = c.pipeline(transaction=True)
        t.set("x", 1)
        with pytest.raises(redis.ResponseError) as e:
            t.execute()
        errs.append(str(e.value))
    assert errs[0] == errs[2] == "You can't write against a read only replica."
    assert errs[1] == errs[3]
    # replica-read-only no: local writes are allowed
    rc = r.client()
    rc.config_set("replica-read-only", "no")
    assert rc.set("local", 1)
    assert list(rc.config_get("replica-read-only").values()) in (["no"], [b"no"])


@pytest.mark.timeout(90)
def test_min_replicas_to_write(kv_factory):
    m = kv_factory("--repl-diskless-sync-delay", "0")
    mc = m.client()
    mc.config_set("min-replicas-to-write", 1)
    with pytest.raises(redis.ResponseError, match="Not enough good replicas to write.$"):
        mc.set("a", 1)
    r = kv_factory()
    replicate(r.client(), m.port)
    wait_link_up(r.client())
    wait_for(lambda: mc.set("a", 1), 5, "a good replica")
    mc.config_set("min-replicas-to-write", 0)


# ---- chaining, promotion ----


@pytest.mark.timeout(90)
def test_chain_and_promotion_continue(kv_factory, real):
    a = kv_factory("--repl-diskless-sync-delay", "0")
    b = kv_factory("--repl-diskless-sync-delay", "0")
    c = real()
    ac, bc, cc = a.client(), b.client(), c.client()
    populate(ac, 3000)
    replicate(bc, a.port)
    wait_link_up(bc)
    replicate(cc, b.port)  # a real Redis fed by a brisk-kv replica
    wait_link_up(cc)
    write_load(ac, 1)
    # The short TTLs of the load must all have expired (and their DELs gone
    # down the stream) before b is promoted: a later DEL on a would move a's
    # offset past b's second_repl_offset and a would rightly need a full sync.
    # Touching every short key deletes the expired ones now (their DELs go
    # down the stream before the sync point below).
    time.sleep(0.5)
    p = ac.pipeline(transaction=False)
    for i in range(NKEYS):
        p.exists(f"load:short:{i}")
    p.execute()
    ac.set("sync", 1)
    wait_same_offset(ac, bc, cc)
    assert_same_data(ac, cc)
    # promote b: c continues (+CONTINUE), then a follows b and continues too
    bc.execute_command("REPLICAOF", "NO", "ONE")
    bi = info(bc)
    assert bi["master_replid2"] == info(ac)["master_replid"]
    bc.set("promoted", 1)
    replicate(ac, b.port)
    wait_link_up(ac)
    wait_link_up(cc)
    wait_same_offset(bc, ac, cc)
    assert ac.get("promoted") == b"1" and cc.get("promoted") == b"1"
    st = info(bc, "stats")
    assert st["sync_full"] == 1 and st["sync_partial_ok"] >= 2, st


# ---- Sentinel ----


@pytest.mark.timeout(90)
def test_sentinel_failover(kv_factory, real):
    nodes = [kv_factory("--repl-diskless-sync-delay", "0")]
    master = nodes[0]
    for _ in range(2):
        n = kv_factory("--repl-diskless-sync-delay", "0")
        replicate(n.client(), master.port)
        nodes.append(n)
    for n in nodes[1:]:
        wait_link_up(n.client())
    conf = (f"sentinel monitor mymaster 127.0.0.1 {master.port} 2\n"
            "sentinel down-after-milliseconds mymaster 1000\n"
            "sentinel failover-timeout mymaster 10000\n"
            "sentinel parallel-syncs mymaster 2\n")
    sentinels = [real(sentinel_conf=conf) for _ in range(3)]
    st = Sentinel([("127.0.0.1", s.port) for s in sentinels], socket_timeout=2)
    wait_for(lambda: all(len(s.client().execute_command("SENTINEL", "REPLICAS", "mymaster")) == 2
                         for s in sentinels), 30, "sentinels seeing 2 replicas")
    wait_for(lambda: all(int(dict(zip(*[iter(s.client().execute_command(
        "SENTINEL", "MASTER", "mymaster"))] * 2))[b"num-other-sentinels"]) == 2
        for s in sentinels), 30, "sentinels seeing each other")
    w = st.master_for("mymaster", socket_timeout=2)
    acked = []
    for i in range(200):
        w.set(f"fo:{i}", i)
        if w.execute_command("WAIT", 1, 1000) >= 1:
            acked.append(i)
    assert len(acked) == 200
    master.kill9()
    master.expect_exit = True

    def new_master():
        addr = st.discover_master("mymaster")
        return addr if addr[1] != master.port else None
    host, port = wait_for(new_master, 40, "failover")
    promoted = next(n for n in nodes if n.port == port)
    other = next(n for n in nodes[1:] if n.port != port)
    wait_for(lambda: info(other.client()).get("master_port") == port and
             info(other.client()).get("master_link_status") == "up", 30, "the other follows")
    w = st.master_for("mymaster", socket_timeout=2)
    wait_for(lambda: w.set("after-failover", 1), 20, "writes through Sentinel")
    pc = promoted.client()
    for i in acked:
        assert pc.get(f"fo:{i}") == str(i).encode()
    assert info(pc)["role"] == "master"
    wait_same_offset(pc, other.client())
    assert other.client().get("after-failover") == b"1"


# ---- shapes: INFO replication, ROLE, PUBLISH ----


@pytest.mark.timeout(60)
def test_info_and_role_shapes_match_redis(kv_factory, real):
    km = kv_factory("--repl-diskless-sync-delay", "0")
    rm = real("--repl-diskless-sync-delay", "0")
    kr, rr = kv_factory(), real()
    pairs = ((km.client(), kr.client()), (rm.client(), rr.client()))
    for m, r in pairs:
        replicate(r, m.connection_pool.connection_kwargs["port"])
    for m, r in pairs:
        wait_link_up(r)
        m.set("x", 1)
        wait_same_offset(m, r)
    (kmc, krc), (rmc, rrc) = pairs
    # field names in order (values differ: ids, ports, offsets)
    assert list(info(kmc)) == list(info(rmc))
    assert list(info(krc)) == list(info(rrc))
    km_role, rm_role = kmc.execute_command("ROLE"), rmc.execute_command("ROLE")
    assert km_role[0] == rm_role[0] == b"master"
    assert [type(v) for v in km_role] == [type(v) for v in rm_role]
    assert [type(v) for v in km_role[2][0]] == [type(v) for v in rm_role[2][0]]
    assert km_role[2][0][1] == str(kr.port).encode()
    kr_role, rr_role = krc.execute_command("ROLE"), rrc.execute_command("ROLE")
    assert [type(v) for v in kr_role] == [type(v) for v in rr_role]
    assert kr_role[3] == rr_role[3] == b"connected"
    # REPLCONF from an ordinary client
    for c in (kmc, rmc):
        assert c.execute_command("REPLCONF", "listening-port", "1234") == b"OK"
    errs = []
    for c in (kmc, rmc):
        with pytest.raises(redis.ResponseError) as e:
            c.execute_command("REPLCONF", "nosuch", "1")
        errs.append(str(e.value))
    assert errs[0] == errs[1]


@pytest.mark.timeout(60)
def test_publish_reaches_replica_subscribers(kv_factory, real):
    m = kv_factory("--repl-diskless-sync-delay", "0")
    rr = real()
    kr = kv_factory()
    for c in (rr.client(), kr.client()):
        replicate(c, m.port)
    for c in (rr.client(), kr.client()):
        wait_link_up(c)
    # both replicas online on the master's side too (after their first ACK)
    deadline = time.time() + 15
    while time.time() < deadline:
        info = m.client().info("replication")
        states = [v.get("state") for k, v in info.items() if k.startswith("slave")]
        if states.count("online") == 2:
            break
        time.sleep(0.1)
    subs = []
    # Keep the clients referenced: a collected redis.Redis closes its pool,
    # and with it the PubSub's connection (redis-py then re-subscribes on a
    # new one and the message sent to the old one is gone).
    clients = [rr.client(), kr.client()]
    for c in clients:
        p = c.pubsub()
        p.subscribe("news")
        # the subscription must be in place before the PUBLISH arrives
        deadline = time.time() + 5
        while time.time() < deadline:
            msg = p.get_message(timeout=1)
            if msg and msg["type"] == "subscribe":
                break
        subs.append(p)
    m.client().publish("news", "hello")
    for p in subs:
        deadline = time.time() + 5
        msg = None
        while time.time() < deadline:
            msg = p.get_message(timeout=1)
            if msg and msg["type"] == "message":
                break
        assert msg and msg["data"] == b"hello", msg


# ---- link kills under a multi-db write load (the lost-key flake) ----


def _kill_loop_load(mc_port, seconds, seed):
    """Writers on dbs 0, 9 and 11 (numbered keys, counters, MULTI/EXEC)
    until the deadline."""
    rnd = random.Random(seed)
    ws = [redis.Redis(host="127.0.0.1", port=mc_port, db=d) for d in (0, 9, 11)]
    end = time.time() + seconds
    i = 0
    while time.time() < end:
        w = ws[rnd.randint(0, 2)]
        p = w.pipeline(transaction=False)
        for _ in range(rnd.randint(1, 40)):
            p.set(f"k:{i}", i)
            if i % 7 == 0:
                p.incr("ctr")
            if i % 11 == 0:
                p.set(f"ttl:{i}", i, px=rnd.randint(1, 200))
            i += 1
        p.execute()
        if i % 5 == 0:
            with w.pipeline(transaction=True) as t:
                t.incr("txc")
                t.set(f"tx:{i}", i)
                t.execute()
    return i


@pytest.mark.timeout(120)
@pytest.mark.parametrize("master_kind,kill", [("brisk", "master"), ("brisk", "replica"),
                                              ("redis", "master")])
def test_link_kills_lose_no_key(kv_factory, real, master_kind, kill):
    """The link is cut every 10-150 ms while three clients write to three
    dbs. The stream continues after +CONTINUE without a new SELECT: the
    replica must apply it to the db it had selected (it used to restart
    in db 0 and misplace a few keys)."""
    import threading
    if master_kind == "brisk":
        m = kv_factory("--repl-diskless-sync-delay", "0", "--repl-backlog-size", "16mb",
                       "--enable-debug-command", "yes")  # DEBUG DIGEST below
        mport = m.port
    else:
        m = real("--repl-diskless-sync-delay", "0", "--repl-backlog-size", "16mb")
        mport = m.port
    mc = m.client()
    r = kv_factory("--enable-debug-command", "yes")
    rc = r.client()
    replicate(rc, mport)
    wait_link_up(rc)
    stop = threading.Event()
    kills = []

    def killer():
        rnd = random.Random(3)
        kc = rc if kill == "master" else m.client()
        while not stop.is_set():
            time.sleep(rnd.uniform(0.01, 0.15))
            try:
                kills.append(kc.execute_command("CLIENT", "KILL", "TYPE", kill))
            except redis.RedisError:
                pass
    t = threading.Thread(target=killer)
    t.start()
    try:
        _kill_loop_load(mport, 4, 5)
    finally:
        stop.set()
        t.join()
    mc.set("final", 1)
    wait_link_up(rc)
    assert sum(kills) >= 10, kills

    # The short TTLs expire on the master, which sends DELs, so the two
    # converge; a key lost for good never does.
    def state(port):
        out = []
        for d in (0, 9, 11):
            c = redis.Redis(host="127.0.0.1", port=port, db=d)
            out.append((d, c.dbsize(), c.get("ctr"), c.get("txc")))
        return out
    wait_for(lambda: not redis.Redis(host="127.0.0.1", port=mport).keys("ttl:*"), 20, "TTLs")
    if master_kind == "brisk":
        wait_for(lambda: state(r.port) == state(mport) and mc.execute_command("DEBUG", "DIGEST")
                 == rc.execute_command("DEBUG", "DIGEST"), 20, "same data on the replica")
    else:  # brisk-kv's DEBUG DIGEST is not Redis's: compare key by key
        wait_for(lambda: state(r.port) == state(mport), 20, "same sizes on the replica")
        wait_same_offset(mc, rc)
        assert_same_data(mc, rc, (0, 9, 11))
    assert state(r.port) == state(mport)
    st = info(mc, "stats")
    assert st["sync_full"] == 1 and st["sync_partial_ok"] >= 10, st


# ---- a replica restarted within the backlog continues (RDB aux fields) ----


@pytest.mark.timeout(90)
@pytest.mark.parametrize("master_kind", ["brisk", "redis"])
def test_brisk_replica_restart_continues(kv_factory, real, master_kind):
    """SHUTDOWN/SIGTERM of a replica saves repl-id, repl-offset and
    repl-stream-db in its dump.rdb; at start-up they are its cached master:
    PSYNC gets +CONTINUE (sync_partial_ok +1, sync_full unchanged)."""
    if master_kind == "brisk":
        m = kv_factory("--repl-diskless-sync-delay", "0")
    else:
        m = real("--repl-diskless-sync-delay", "0")
    mc = m.client()
    populate(mc, 2000)
    r = kv_factory("--save", "3600 1", "--replicaof", "127.0.0.1", str(m.port))
    rc = r.client()
    wait_link_up(rc)
    mc.execute_command("SELECT", 9)  # the stream has db 9 selected at the restart
    mc.set("before", "1")
    mc.execute_command("SELECT", 0)
    wait_same_offset(mc, rc)
    rid = info(rc)["master_replid"]
    assert r.stop() == 0
    assert "DB saved on disk" in r.output()
    # the stream continues in db 9 with no SELECT: the restarted replica
    # must apply it there (repl-stream-db)
    c9 = redis.Redis(host="127.0.0.1", port=m.port, db=9)
    c9.set("while-down-9", "1")
    mc.set("while-down", "1")
    mc.incr("counter")
    r.start()
    rc = r.client()
    wait_link_up(rc)
    wait_same_offset(mc, rc)
    assert rc.get("while-down") == b"1"
    assert redis.Redis(host="127.0.0.1", port=r.port, db=9).get("while-down-9") == b"1"
    assert rc.get("while-down-9") is None
    st = info(mc, "stats")
    assert st["sync_partial_ok"] == 1 and st["sync_full"] == 1, st
    assert info(rc)["master_replid"] == rid
    assert_same_data(mc, rc)
    assert "Successful partial resynchronization" in r.output()


@pytest.mark.timeout(60)
def test_master_restart_keeps_history_as_replid2(kv_factory):
    """A master's dump.rdb carries its id and offset too: after a restart
    the old id is master_replid2 (second_repl_offset = offset + 1), as in
    Redis 7.0 (psync2-master-restart)."""
    m = kv_factory("--save", "3600 1", "--repl-diskless-sync-delay", "0")
    mc = m.client()
    r = kv_factory()
    replicate(r.client(), m.port)
    wait_link_up(r.client())
    mc.set("a", 1)
    wait_same_offset(mc, r.client())
    # and the master has the replica's ack of it: else its shutdown waits
    # for the replica and sends REPLCONF GETACK first (37 more bytes of
    # offset), as Redis 7.0's does
    wait_for(lambda: mc.info("replication")["slave0"]["offset"] == info(mc)["master_repl_offset"],
             30, "the replica's ack at the master")
    before = info(mc)
    m.restart()
    mc = m.client()
    after = info(mc)
    assert after["master_replid"] != before["master_replid"]
    assert after["master_replid2"] == before["master_replid"]
    assert after["master_repl_offset"] == before["master_repl_offset"]
    assert after["second_repl_offset"] == before["master_repl_offset"] + 1
    assert after["repl_backlog_active"] == 1
    # the replica reconnects and continues
    wait_link_up(r.client())
    mc.set("b", 2)
    wait_same_offset(mc, r.client())
    assert r.client().get("b") == b"2"
    st = info(mc, "stats")
    assert st["sync_partial_ok"] == 1 and st["sync_full"] == 0, st


# ---- FAILOVER ----


def _err(c, *args):
    try:
        return c.execute_command(*args)
    except redis.ResponseError as e:
        return f"ERR: {e}"


@pytest.mark.timeout(60)
def test_failover_errors_match_redis(kv_factory, real):
    km, rm = kv_factory("--repl-diskless-sync-delay", "0"), real("--repl-diskless-sync-delay", "0")
    kr, rr = kv_factory(), real()
    pairs = ((km, kr), (rm, rr))
    no_replicas = [("FAILOVER",), ("FAILOVER", "ABORT"), ("FAILOVER", "TO", "127.0.0.1", "1"),
                   ("FAILOVER", "TO", "127.0.0.1"), ("FAILOVER", "FORCE"),
                   ("FAILOVER", "TIMEOUT", "0"), ("FAILOVER", "TIMEOUT", "-1"),
                   ("FAILOVER", "TIMEOUT", "x"), ("FAILOVER", "TO", "127.0.0.1", "x"),
                   ("FAILOVER", "bogus"), ("FAILOVER", "ABORT", "TIMEOUT", "10"),
                   ("FAILOVER", "TO", "h", "1", "TO", "h", "2"), ("FAILOVER", "FORCE", "ABORT"),
                   ("FAILOVER", "TIMEOUT", "9223372036854775807"),
                   ("FAILOVER", "TIMEOUT", "-9223372036854775808"),
                   ("FAILOVER", "TO", "127.0.0.1", "9223372036854775808")]
    got = [[_err(m.client(), *a) for a in no_replicas] for m, _ in pairs]
    assert got[0] == got[1]
    for m, r in pairs:
        replicate(r.client(), m.port)
    for m, r in pairs:
        wait_link_up(r.client())
    with_replicas = [("FAILOVER", "FORCE"), ("FAILOVER", "TIMEOUT", "10", "FORCE"),
                     ("FAILOVER", "TO", "127.0.0.1", "70000"), ("FAILOVER", "TO", "127.0.0.1", "-1"),
                     ("FAILOVER", "TO", "localhost", "{rport}"),
                     ("FAILOVER", "TO", "127.0.0.1", "{rport}", "FORCE"),
                     ("FAILOVER", "TIMEOUT", "0", "TO", "127.0.0.1", "1")]
    got = []
    for m, r in pairs:
        got.append([_err(m.client(), *[a.format(rport=r.port) for a in args])
                    for args in with_replicas])
        got[-1].append(_err(r.client(), "FAILOVER"))
        c = m.client()
        p = c.pipeline(transaction=True)
        p.execute_command("FAILOVER", "ABORT")
        got[-1].append(str(p.execute(raise_on_error=False)))
    assert got[0] == got[1]
    for m, _ in pairs:
        assert info(m.client())["master_failover_state"] == "no-failover"


@pytest.mark.timeout(90)
@pytest.mark.parametrize("kinds", [("brisk", "brisk"), ("brisk", "redis"), ("redis", "brisk")])
def test_failover_swaps_roles(kv_factory, real, kinds):
    """FAILOVER TO the replica: writes pause, the replica takes over through
    PSYNC ... FAILOVER, the old master continues as its replica with
    +CONTINUE (no full sync), no acknowledged write is lost. Both ways with
    real Redis: a real replica taken over by brisk-kv's FAILOVER, and a
    brisk-kv replica taken over by a real master's."""
    mk, rk = kinds
    m = kv_factory("--repl-diskless-sync-delay", "0") if mk == "brisk" else \
        real("--repl-diskless-sync-delay", "0")
    r = kv_factory("--repl-diskless-sync-delay", "0") if rk == "brisk" else \
        real("--repl-diskless-sync-delay", "0")
    mc, rc = m.client(), r.client()
    populate(mc, 1000)
    replicate(rc, m.port)
    wait_link_up(rc)
    for i in range(100):
        mc.set(f"fo:{i}", i)
    assert mc.execute_command("WAIT", 1, 5000) == 1
    assert mc.execute_command("FAILOVER", "TO", "127.0.0.1", r.port, "TIMEOUT", 10000) == b"OK"
    wait_for(lambda: info(mc)["role"] == "slave" and info(rc)["role"] == "master" and
             info(mc)["master_failover_state"] == "no-failover" and
             info(mc)["master_link_status"] == "up", 30, "roles swapped")
    assert info(mc)["master_port"] == r.port
    rc.set("after", 1)
    wait_same_offset(rc, mc)
    assert mc.get("after") == b"1"
    assert_same_data(rc, mc)
    st = info(rc, "stats")
    assert st["sync_partial_ok"] == 1 and st["sync_full"] == 0, st
    with pytest.raises(redis.ResponseError, match="read only replica"):
        mc.set("x", 1)


@pytest.mark.timeout(60)
def test_failover_timeout_aborts_and_force_proceeds(kv_factory):
    m = kv_factory("--repl-diskless-sync-delay", "0")
    r = kv_factory()
    mc, rc = m.client(), r.client()
    replicate(rc, m.port)
    wait_link_up(rc)
    r.proc.send_signal(signal.SIGSTOP)
    try:
        mc.set("k", 1)
        assert mc.execute_command("FAILOVER", "TIMEOUT", 300) == b"OK"
        assert info(mc)["master_failover_state"] == "waiting-for-sync"
        # writes wait during the failover; reads do not
        assert mc.get("k") == b"1"
        wait_for(lambda: info(mc)["master_failover_state"] == "no-failover", 10, "timeout")
        assert info(mc)["role"] == "master"
        assert "FAILOVER aborted: Replica never caught up before timeout" in m.output()
        assert mc.set("k", 2)  # unpaused
        assert mc.execute_command("FAILOVER", "TO", "127.0.0.1", r.port) == b"OK"
        assert mc.execute_command("FAILOVER", "ABORT") == b"OK"
        assert mc.set("k", 3)
        assert mc.execute_command("FAILOVER", "TO", "127.0.0.1", r.port, "TIMEOUT", 300,
                                  "FORCE") == b"OK"
        wait_for(lambda: info(mc)["master_failover_state"] == "failover-in-progress", 10,
                 "forced past the timeout")
    finally:
        r.proc.send_signal(signal.SIGCONT)
    wait_for(lambda: info(rc)["role"] == "master" and info(mc).get("master_link_status") == "up",
             30, "forced failover")
    # FORCE may lose what the stopped replica had not read: only agreement
    wait_same_offset(rc, mc)
    assert mc.get("k") == rc.get("k")


def test_script_that_wrote_keeps_writing_when_replicas_drop(kv_factory, tmp_path):
    """min-replicas-to-write is checked at a script's first write only: a
    script that wrote while the replica was there finishes its writes after
    the replica is gone (as Redis: a script is not left half done)."""
    import threading
    master = kv_factory("--repl-diskless-sync-delay", "0", workdir=tmp_path / "m")
    mc = master.client(decode_responses=True)
    replica = kv_factory("--replicaof", "127.0.0.1", str(master.port), workdir=tmp_path / "r")
    wait_link_up(replica.client())
    wait_for(lambda: info(mc)["connected_slaves"] == 1, 30, "replica online")
    mc.config_set("min-replicas-to-write", 1)
    mc.config_set("busy-reply-threshold", 10)
    wait_for(lambda: info(mc).get("min_slaves_good_slaves") == 1, 30, "a good replica")
    out = {}

    def run():
        c = master.client(decode_responses=True)
        try:
            out["r"] = script(c)
        except Exception as e:  # noqa: BLE001 (reported below)
            out["r"] = e

    def script(c):
        return c.eval("""
            redis.call('set','x','script value')
            while true do
                local info = redis.call('info','replication')
                if string.match(info, 'connected_slaves:0') then
                    redis.call('set','x',info)
                    break
                end
            end
            return 1""", 1, "x")
    t = threading.Thread(target=run)
    t.start()
    wait_for(lambda: "BUSY" in str(_ping_error(master)) or not t.is_alive(), 20,
             "the script to time out")
    assert t.is_alive(), (out, master.output()[-1500:], replica.output()[-1500:])
    replica.client().replicaof("no", "one")
    t.join(30)
    assert out.get("r") == 1
    assert "connected_slaves:0" in mc.get("x")
    # a new script's first write is refused again
    with pytest.raises(redis.ResponseError, match="NOREPLICAS"):
        mc.eval("return redis.call('set','x','y')", 1, "x")


def _ping_error(server):
    try:
        server.client().ping()
        return ""
    except redis.ResponseError as e:
        return e


def test_script_set_repl_targets(kv_factory, tmp_path):
    """redis.set_repl: REPL_NONE reaches neither, REPL_AOF the AOF only,
    REPL_REPLICA the replicas only, REPL_ALL both (Redis's suite's
    'selective replication' case, plus REPL_REPLICA)."""
    master = kv_factory("--appendonly", "yes", "--enable-debug-command", "yes",
                        "--repl-diskless-sync-delay", "0", workdir=tmp_path / "m")
    mc = master.client(decode_responses=True)
    replica = kv_factory("--replicaof", "127.0.0.1", str(master.port), workdir=tmp_path / "r")
    rc = replica.client(decode_responses=True)
    wait_link_up(rc)
    mc.eval("""
        redis.call('set','a','1')
        redis.set_repl(redis.REPL_NONE)
        redis.call('set','b','2')
        redis.set_repl(redis.REPL_AOF)
        redis.call('set','c','3')
        redis.set_repl(redis.REPL_REPLICA)
        redis.call('set','e','5')
        redis.set_repl(redis.REPL_ALL)
        redis.call('set','d','4')""", 0)
    wait_for(lambda: rc.get("d") == "4", 30, "the replica")
    assert rc.mget("a", "b", "c", "d", "e") == ["1", None, None, "4", "5"]
    assert mc.mget("a", "b", "c", "d", "e") == ["1", "2", "3", "4", "5"]
    mc.execute_command("DEBUG", "LOADAOF")
    assert mc.mget("a", "b", "c", "d", "e") == ["1", None, "3", "4", None]
    # the next script propagates everything again
    mc.eval("redis.call('set','f','6')", 0)
    wait_for(lambda: rc.get("f") == "6", 30, "the replica")
