"""Replication over TLS (tls-replication, a master's tls-port), between
brisk-kv and a real redis-server 7 both ways: disk-backed and diskless
full syncs of a few thousand keys of every type, the command stream after
them, +CONTINUE after a replica restart within the backlog, a master whose
certificate does not verify, plain TCP / TLS on the wrong port, FAILOVER
and real redis-sentinels failing over, over TLS only.

Certificates come from test_kv_tls.py's `certs` fixture (openssl CLI: a CA,
a server certificate for localhost / 127.0.0.1, a client certificate, one
from another CA)."""
from __future__ import annotations

import os
import re
import subprocess
import time

import pytest
import redis

from kvlib import free_port
from test_kv_replication import REDIS_SERVER, info, real, wait_for  # noqa: F401
from test_kv_tls import OPENSSL, certs  # noqa: F401

pytestmark = pytest.mark.skipif(not (REDIS_SERVER and OPENSSL),
                                reason="needs redis-server and openssl")

NKEYS = 3000


def tls_opts(d, tls_port, *, ca="ca", client_cert=None, ca_dir=None):
    """A node with a TLS port whose clients (replicas too) must show a
    certificate of our CA (tls-auth-clients yes, Redis's default)."""
    cas = ["--tls-ca-cert-dir", str(ca_dir)] if ca_dir else ["--tls-ca-cert-file",
                                                             str(d / f"{ca}.crt")]
    args = ["--tls-port", str(tls_port), "--tls-cert-file", str(d / "server.crt"),
            "--tls-key-file", str(d / "server.key"), *cas, "--tls-auth-clients", "yes"]
    if client_cert:
        args += ["--tls-client-cert-file", str(d / f"{client_cert}.crt"),
                 "--tls-client-key-file", str(d / f"{client_cert}.key")]
    return args


class Node:
    """A brisk-kv (kv_factory) or real Redis (real) node with a TLS port."""

    def __init__(self, kind, kv_factory, real, certs, *extra, **tls_kw):
        self.kind = kind
        self.tls_port = free_port()
        args = [*tls_opts(certs, self.tls_port, **tls_kw), *extra]
        self.s = kv_factory(*args) if kind == "brisk" else real(*args)

    @property
    def port(self):
        return self.s.port

    def client(self):
        return self.s.client(socket_timeout=30)

    def log(self):
        return self.s.output() if self.kind == "brisk" else self.s.log()


def fill(c, n=NKEYS, prefix="k"):
    p = c.pipeline(transaction=False)
    for i in range(n):
        k = f"{prefix}:{i}"
        kind = i % 6
        if kind == 0:
            p.set(k, f"v{i}" * (1 + i % 40))
            if i % 12 == 0:
                p.pexpire(k, 3_600_000)
        elif kind == 1:
            p.rpush(k, *[f"e{j}" for j in range(1 + i % 20)])
        elif kind == 2:
            p.hset(k, mapping={f"f{j}": f"x{j * i}" for j in range(1 + i % 15)})
        elif kind == 3:
            p.sadd(k, *[str(j * 7) if i % 2 else f"m{j}" for j in range(1 + i % 25)])
        elif kind == 4:
            p.zadd(k, {f"z{j}": j * 1.5 for j in range(1 + i % 30)})
        else:
            for j in range(1 + i % 5):
                p.xadd(k, {"a": str(j), "b": "y" * j}, id=f"{j + 1}-0")
        if i % 500 == 499:
            p.execute()
    p.execute()


def dataset(c):
    """Every key's type and DUMP payload (RDB format, version and CRC
    included), with its TTL rounded to the minute."""
    out = {}
    for k in c.scan_iter(count=1000):
        ttl = c.pttl(k)
        out[k] = (c.type(k), c.dump(k), round(ttl / 60000) if ttl > 0 else ttl)
    return out


def values(c):
    """Every key's value, read through commands (encoding-independent)."""
    out = {}
    for k in c.scan_iter(count=1000):
        t = c.type(k)
        if t == b"string":
            v = c.get(k)
        elif t == b"list":
            v = c.lrange(k, 0, -1)
        elif t == b"hash":
            v = sorted(c.hgetall(k).items())
        elif t == b"set":
            v = sorted(c.smembers(k))
        elif t == b"zset":
            v = c.zrange(k, 0, -1, withscores=True)
        else:
            v = c.xrange(k)
        out[k] = (t, v)
    return out


def caught_up(m, r):
    mo = info(m)["master_repl_offset"]
    ri = info(r)
    return ri.get("master_link_status") == "up" and ri.get("slave_repl_offset") == mo


def assert_same(m, r):
    wait_for(lambda: caught_up(m, r), 30, "the replica to catch up")
    assert r.dbsize() == m.dbsize()
    assert values(r) == values(m)


def sync_counts(m):
    s = m.info("stats")
    return s["sync_full"], s["sync_partial_ok"]


@pytest.mark.parametrize("diskless", ["no", "yes"])
@pytest.mark.parametrize("master_kind", ["brisk", "redis"])
def test_tls_replication_both_ways(kv_factory, real, certs, master_kind, diskless):
    replica_kind = "redis" if master_kind == "brisk" else "brisk"
    master = Node(master_kind, kv_factory, real, certs, "--repl-diskless-sync", diskless,
                  "--repl-diskless-sync-delay", "0")
    m = master.client()
    fill(m)
    # brisk-kv replicas present tls-client-cert-file's certificate, Redis's
    # their tls-cert-file (both accepted: same CA)
    kw = {"client_cert": "client"} if replica_kind == "brisk" else {}
    replica = Node(replica_kind, kv_factory, real, certs, "--tls-replication", "yes",
                   "--replicaof", "127.0.0.1", str(master.tls_port), **kw)
    r = replica.client()
    wait_for(lambda: info(r).get("master_link_status") == "up", 60, "master link up")
    assert_same(m, r)
    # brisk-kv's DUMP payloads are Redis's (an RDB made by one loads
    # into the other): the replica's keys dump as the master's
    assert dataset(r) == dataset(m)
    full, partial = sync_counts(m)
    assert full == 1
    if master_kind == "brisk":
        log = master.log()
        assert "Synchronization with replica" in log and "succeeded" in log

    # the stream: writes of every kind keep flowing
    fill(m, 600, prefix="after")
    m.delete("k:0", "k:1")
    m.incrby("counter", 5)
    assert_same(m, r)
    assert m.wait(1, 5000) == 1  # REPLCONF ACK over TLS

    # the link drops: +CONTINUE from the backlog
    m.execute_command("CLIENT", "KILL", "TYPE", "replica")
    m.set("during", "gap")
    wait_for(lambda: sync_counts(m)[1] == partial + 1, 30, "a partial resync")
    assert_same(m, r)

    # the replica restarts from its RDB within the backlog: +CONTINUE again
    r.shutdown(save=True)
    assert replica.s.proc.wait(10) == 0
    if replica_kind == "brisk":
        replica.s.stop()  # (closes its log)
    m.set("while-down", "1")
    replica.s.start()
    r = replica.client()
    wait_for(lambda: sync_counts(m)[1] == partial + 2, 30, "a partial resync after restart")
    assert sync_counts(m)[0] == 1, "no second full sync"
    assert_same(m, r)
    assert r.get("while-down") == b"1"


def test_big_values_and_a_slow_tls_replica(kv_factory, real, certs):
    """A diskless sync bigger than the socket and pipe buffers, to a real
    Redis replica that loads slowly (key-load-delay): the relay follows the
    replica's pace, the master keeps serving meanwhile."""
    master = Node("brisk", kv_factory, real, certs, "--repl-diskless-sync", "yes",
                  "--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes")
    m = master.client()
    m.execute_command("DEBUG", "POPULATE", "200", "big", "100000")  # 20 MB
    replica = Node("redis", kv_factory, real, certs, "--tls-replication", "yes",
                   "--key-load-delay", "2000", "--repl-diskless-load", "swapdb")
    r = replica.client()
    r.replicaof("127.0.0.1", master.tls_port)
    wait_for(lambda: "Starting BGSAVE for SYNC" in master.log(), 10, "the full sync")
    t0 = time.time()
    while time.time() - t0 < 0.3:
        assert m.ping()
    wait_for(lambda: info(r).get("master_link_status") == "up", 60, "master link up")
    assert_same(m, r)


def test_master_certificate_that_does_not_verify(kv_factory, real, certs):
    master = Node("brisk", kv_factory, real, certs)
    # our CA is another one: the master's certificate does not verify
    replica = Node("brisk", kv_factory, real, certs, "--tls-replication", "yes", ca="otherca",
                   client_cert="client")
    r = replica.client()
    r.replicaof("127.0.0.1", master.tls_port)
    time.sleep(3.5)
    log = replica.log()
    fails = re.findall(r"TLS handshake with master 127\.0\.0\.1:\d+ failed: .*", log)
    assert fails, log[-3000:]
    assert "certificate verify failed" in fails[0], fails[0]
    # Redis's pace: one attempt a second (3.5 s: 3 or 4, not dozens)
    assert 2 <= len(fails) <= 5, fails
    assert info(r)["master_link_status"] == "down"
    assert r.ping()
    assert master.client().ping()


@pytest.mark.parametrize("master_kind", ["brisk", "redis"])
def test_plain_replica_on_the_tls_port(kv_factory, real, certs, master_kind):
    master = Node(master_kind, kv_factory, real, certs)
    replica = kv_factory()  # plain TCP
    r = replica.client()
    r.replicaof("127.0.0.1", master.tls_port)
    time.sleep(2.5)
    assert info(r)["master_link_status"] == "down"
    # refused at once each time (the master closes on our PING), retried
    # once a second as Redis's replica does, not at every cron tick
    assert 2 <= replica.output().count("Master link to") <= 4, replica.output()[-2000:]
    assert r.ping() and master.client().ping()
    assert info(master.client())["connected_slaves"] == 0
    # it keeps trying, and syncs once pointed at the plain port
    r.replicaof("127.0.0.1", master.port)
    wait_for(lambda: info(r).get("master_link_status") == "up", 30, "master link up")


@pytest.mark.parametrize("master_kind", ["brisk", "redis"])
def test_tls_replica_on_the_plain_port(kv_factory, real, certs, master_kind):
    master = Node(master_kind, kv_factory, real, certs)
    replica = Node("brisk", kv_factory, real, certs, "--tls-replication", "yes",
                   "--repl-timeout", "2")
    r = replica.client()
    r.replicaof("127.0.0.1", master.port)
    # brisk-kv's plain port closes on the ClientHello (a protocol error);
    # Redis's waits for the end of an inline command that never comes: the
    # handshake times out (repl-timeout)
    wait_for(lambda: re.search(r"TLS handshake with master .* failed|Timeout connecting to the "
                               r"MASTER", replica.log()), 10, "the handshake to fail")
    assert info(r)["master_link_status"] == "down"
    assert r.ping() and master.client().ping()
    r.replicaof("127.0.0.1", master.tls_port)
    wait_for(lambda: info(r).get("master_link_status") == "up", 30, "master link up")


def test_tls_replication_needs_a_certificate(kv_factory, certs):
    s = kv_factory("--tls-replication", "yes", start=False)
    s.expect_exit = True
    s.start(wait=False)
    assert s.proc.wait(10) != 0
    assert "Failed to configure TLS for replication: tls-cert-file and tls-key-file must be set" \
        in s.output()
    # at run time: refused as Redis refuses it, then accepted once the files are there
    c = kv_factory().client()
    with pytest.raises(redis.ResponseError, match="Unable to update TLS configuration"):
        c.config_set("tls-replication", "yes")
    c.config_set("tls-cert-file", str(certs / "server.crt"))
    c.config_set("tls-key-file", str(certs / "server.key"))
    c.config_set("tls-ca-cert-file", str(certs / "ca.crt"))
    assert c.config_set("tls-replication", "yes")
    assert c.config_get("tls-replication") == {"tls-replication": "yes"}


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.mark.parametrize("drop", ["slow", "fast"])
def test_tls_replica_dropped_during_the_relay(kv_factory, real, certs, drop):
    """Two TLS replicas share one diskless sync, one slow; one of them dies
    halfway: the child gets EPIPE on its pipe and goes on with the other,
    which completes; no pipe is left open in the master."""
    master = Node("brisk", kv_factory, real, certs, "--repl-diskless-sync", "yes",
                  "--repl-diskless-sync-delay", "5", "--repl-diskless-sync-max-replicas", "2",
                  "--enable-debug-command", "yes")
    m = master.client()
    m.execute_command("DEBUG", "POPULATE", "20000", "test", "10000")  # 200 MB, as the suite
    m.config_set("rdbcompression", "no")
    fds0 = open_fds(master.s.proc.pid)
    slow = Node("brisk", kv_factory, real, certs, "--tls-replication", "yes",
                "--repl-diskless-load", "swapdb", "--key-load-delay", "100")
    fast = Node("brisk", kv_factory, real, certs, "--tls-replication", "yes")
    slow.client().replicaof("127.0.0.1", master.tls_port)
    fast.client().replicaof("127.0.0.1", master.tls_port)
    wait_for(lambda: "Loading DB in memory" in slow.log(), 20, "the slow replica's load")
    time.sleep(0.5)
    m.incr("during")
    gone, kept = (slow, fast) if drop == "slow" else (fast, slow)
    gone.s.expect_exit = True
    gone.s.kill9()
    wait_for(lambda: info(m, "persistence")["rdb_bgsave_in_progress"] == 0, 30,
             "the sync child to end")
    k = kept.client()
    wait_for(lambda: info(k).get("master_link_status") == "up", 60, "master link up")
    assert_same(m, k)
    assert "Diskless rdb transfer, done reading from pipe, 1 replicas still up" in master.log()
    wait_for(lambda: open_fds(master.s.proc.pid) <= fds0 + 1, 10, "the pipes to close")


def test_ca_cert_dir_on_both_sides(kv_factory, real, certs, tmp_path):
    """tls-ca-cert-dir (a hashed directory, openssl rehash) instead of the
    file: the master verifies its replica's certificate with it, the
    replica the master's."""
    cadir = tmp_path / "cadir"
    cadir.mkdir()
    (cadir / "ca.pem").write_bytes((certs / "ca.crt").read_bytes())
    subprocess.run([OPENSSL, "rehash", str(cadir)], check=True, capture_output=True)
    master = Node("brisk", kv_factory, real, certs, ca_dir=cadir)
    m = master.client()
    fill(m, 300)
    replica = Node("brisk", kv_factory, real, certs, "--tls-replication", "yes", ca_dir=cadir,
                   client_cert="client")
    r = replica.client()
    r.replicaof("127.0.0.1", master.tls_port)
    wait_for(lambda: info(r).get("master_link_status") == "up", 30, "master link up")
    assert_same(m, r)
    # a real Redis replica of it, with the CA file
    rr = Node("redis", kv_factory, real, certs, "--tls-replication", "yes",
              "--replicaof", "127.0.0.1", str(master.tls_port)).client()
    wait_for(lambda: info(rr).get("master_link_status") == "up", 30, "master link up")
    assert_same(m, rr)


@pytest.mark.parametrize("replica_kind", ["brisk", "redis"])
def test_failover_over_tls(kv_factory, real, certs, replica_kind):
    """FAILOVER between two nodes that replicate over TLS only: the replica
    announces its TLS port (REPLCONF listening-port), the old master
    connects there as a replica (PSYNC ... FAILOVER over TLS), roles swap
    without losing a write, and writes flow the other way afterwards."""
    kw = {"client_cert": "client"}
    master = Node("brisk", kv_factory, real, certs, "--tls-replication", "yes", **kw)
    replica = Node(replica_kind, kv_factory, real, certs, "--tls-replication", "yes",
                   "--replicaof", "127.0.0.1", str(master.tls_port),
                   **(kw if replica_kind == "brisk" else {}))
    m, r = master.client(), replica.client()
    wait_for(lambda: info(r).get("master_link_status") == "up", 60, "master link up")
    fill(m, 600)
    assert_same(m, r)
    slaves = info(m)
    assert slaves["slave0"]["port"] == replica.tls_port, slaves["slave0"]
    assert m.execute_command("FAILOVER", "TIMEOUT", "10000") == b"OK"
    wait_for(lambda: info(m).get("role") == "slave" and info(r).get("role") == "master", 30,
             "the roles to swap")
    assert info(m)["master_port"] == replica.tls_port
    wait_for(lambda: info(m).get("master_link_status") == "up", 30, "the old master's link up")
    assert info(m)["master_failover_state"] == "no-failover"
    r.set("after-failover", "1")
    fill(r, 300, prefix="new")
    assert_same(r, m)
    assert m.get("after-failover") == b"1"
    assert r.info("stats")["sync_full"] == 0, "a partial resync (+CONTINUE), not a full one"


@pytest.mark.timeout(90)
def test_sentinel_failover_over_tls(kv_factory, real, certs):
    """Three real redis-sentinels that reach three brisk-kv nodes over TLS
    only (tls-replication yes on the sentinels: their links to the
    instances are TLS): they find the replicas by the TLS ports those
    announce, fail over when the master dies without losing a
    WAIT-acknowledged write, and point the other replica at the new
    master's TLS port; clients follow through Sentinel over TLS."""
    from redis.sentinel import Sentinel
    kw = {"client_cert": "client"}
    master = Node("brisk", kv_factory, real, certs, "--tls-replication", "yes",
                  "--repl-diskless-sync-delay", "0", **kw)
    nodes = [master] + [Node("brisk", kv_factory, real, certs, "--tls-replication", "yes",
                             "--repl-diskless-sync-delay", "0", "--replicaof", "127.0.0.1",
                             str(master.tls_port), **kw) for _ in range(2)]
    for n in nodes[1:]:
        wait_for(lambda: info(n.client()).get("master_link_status") == "up", 30, "link up")
    # a sentinel announces its tls-port to the others (tls-replication:
    # sentinels reach each other over TLS too)
    conf = (f"tls-replication yes\ntls-cert-file {certs / 'client.crt'}\n"
            f"tls-key-file {certs / 'client.key'}\ntls-ca-cert-file {certs / 'ca.crt'}\n"
            f"sentinel monitor mymaster 127.0.0.1 {master.tls_port} 2\n"
            "sentinel down-after-milliseconds mymaster 1000\n"
            "sentinel failover-timeout mymaster 10000\n"
            "sentinel parallel-syncs mymaster 2\n")
    sentinels = [real(sentinel_conf=f"tls-port {free_port()}\n{conf}") for _ in range(3)]
    wait_for(lambda: all(len(s.client().execute_command("SENTINEL", "REPLICAS", "mymaster")) == 2
                         for s in sentinels), 30, "sentinels seeing 2 replicas")
    wait_for(lambda: all(int(dict(zip(*[iter(s.client().execute_command(
        "SENTINEL", "MASTER", "mymaster"))] * 2))[b"num-other-sentinels"]) == 2
        for s in sentinels), 30, "sentinels seeing each other")
    seen = {int(dict(zip(*[iter(r)] * 2))[b"port"]) for r in
            sentinels[0].client().execute_command("SENTINEL", "REPLICAS", "mymaster")}
    assert seen == {n.tls_port for n in nodes[1:]}
    st = Sentinel([("127.0.0.1", s.port) for s in sentinels], socket_timeout=2)
    tls_kw = dict(ssl=True, ssl_ca_certs=str(certs / "ca.crt"),
                  ssl_certfile=str(certs / "client.crt"), ssl_keyfile=str(certs / "client.key"),
                  socket_timeout=5)
    w = st.master_for("mymaster", **tls_kw)
    acked = [i for i in range(100) if w.set(f"fo:{i}", i) and w.execute_command("WAIT", 2, 2000) >= 2]
    assert len(acked) == 100
    master.s.kill9()
    master.s.expect_exit = True

    def new_master():
        addr = st.discover_master("mymaster")
        return addr if addr[1] != master.tls_port else None
    try:
        _, port = wait_for(new_master, 40, "failover")
    except BaseException:  # what the sentinels saw, for the report
        for s in sentinels:
            print("sentinel log:", s.log()[-3000:])
        raise
    promoted = next(n for n in nodes[1:] if n.tls_port == port)
    other = next(n for n in nodes[1:] if n.tls_port != port)
    wait_for(lambda: info(other.client()).get("master_port") == port and
             info(other.client()).get("master_link_status") == "up", 30, "the other follows")
    w = st.master_for("mymaster", **tls_kw)
    wait_for(lambda: w.set("after-failover", 1), 20, "writes through Sentinel over TLS")
    pc = promoted.client()
    assert all(pc.get(f"fo:{i}") == str(i).encode() for i in acked)
    wait_for(lambda: other.client().get("after-failover") == b"1", 20, "the write replicated")
