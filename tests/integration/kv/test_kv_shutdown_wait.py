"""Redis 7.0's graceful shutdown, brisk-kv side by side with redis-server:
a master whose replica lags (stopped with SIGSTOP) waits up to
shutdown-timeout for its ack, with writes paused and the SHUTDOWN client
blocked; SHUTDOWN ABORT cancels, NOW and shutdown-timeout 0 do not wait, a
failed save after the wait answers the error and writes run again.

Each scenario runs on a brisk-kv master + replica and on a redis-server
master + replica; what the clients saw and the log lines the suite greps
must be the same on both."""
from __future__ import annotations

import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import redis

from kvlib import REDIS_SERVER, call, free_port, run_both, start_redis, stop_redis

SHUTDOWN_ERR = b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n"


class Pair:
    """A master and its replica, brisk-kv's or Redis's."""

    def __init__(self, kind, mc, rc, mport, mproc, rproc, mlog: Path):
        self.kind, self.mc, self.rc, self.mport = kind, mc, rc, mport
        self.mproc, self.rproc, self.mlog = mproc, rproc, mlog

    def log(self) -> str:
        try:
            return self.mlog.read_text(errors="replace")
        except OSError:
            return ""

    def stop_replica(self):
        self.rproc.send_signal(signal.SIGSTOP)
        time.sleep(0.05)

    def cont_replica(self):
        self.rproc.send_signal(signal.SIGCONT)

    def master_exited(self, timeout: float) -> bool:
        try:
            self.mproc.wait(timeout)
            return True
        except Exception:
            return False


@pytest.fixture
def pairs(kv_factory, tmp_path):
    made: list[Pair] = []
    redis_procs = []

    def make(kind: str, *margs: str) -> Pair:
        d = tmp_path / kind
        if kind == "kv":
            m = kv_factory(*margs, workdir=d / "m")
            r = kv_factory("--replicaof", "127.0.0.1", str(m.port), workdir=d / "r")
            p = Pair(kind, m.client(decode_responses=True), r.client(decode_responses=True),
                     m.port, m.proc, r.proc, m.log_path)
        else:
            (d / "m").mkdir(parents=True)
            (d / "r").mkdir()
            mproc, mc = start_redis(d / "m", "--logfile", str(d / "m" / "log"), *margs,
                                    decode_responses=True)
            redis_procs.append((mproc, mc))
            mport = mc.connection_pool.connection_kwargs["port"]
            rproc, rc = start_redis(d / "r", "--replicaof", "127.0.0.1", str(mport),
                                    decode_responses=True)
            redis_procs.append((rproc, rc))
            p = Pair(kind, mc, rc, mport, mproc, rproc, d / "m" / "log")
        made.append(p)
        wait_synced(p)
        return p

    yield make
    for p in made:  # a stopped replica must be able to hear SIGTERM
        if p.rproc.poll() is None:
            p.rproc.send_signal(signal.SIGCONT)
    for proc, c in redis_procs:
        stop_redis(proc, c)


def wait_synced(p: Pair, timeout: float = 10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        mi, ri = p.mc.info("replication"), p.rc.info("replication")
        s0 = mi.get("slave0") or {}
        if (ri.get("master_link_status") == "up" and s0.get("state") == "online" and
                ri.get("master_repl_offset") == mi.get("master_repl_offset") and
                s0.get("offset") == mi.get("master_repl_offset")):
            return
        time.sleep(0.05)
    raise AssertionError(f"{p.kind}: replica not in sync: {p.mc.info('replication')}")


def send(port: int, *args: str) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(f"*{len(args)}\r\n".encode() +
              b"".join(f"${len(a)}\r\n{a}\r\n".encode() for a in args))
    return s


def read(s: socket.socket, timeout: float) -> bytes | None:
    """What came within timeout (b"" when closed), None when nothing did."""
    s.settimeout(timeout)
    try:
        return s.recv(65536)
    except socket.timeout:
        return None
    except ConnectionResetError:
        return b""


def lines(log: str, *patterns: str) -> list[str]:
    """For each pattern, the first matching log line's match (or None)."""
    out = []
    for pat in patterns:
        m = re.search(pat, log)
        out.append(m.group(0) if m else None)
    return out


def both_kinds(pairs, scenario, *margs):
    res = {kind: scenario(pairs(kind, *margs)) for kind in ("kv", "redis")}
    assert res["kv"] == res["redis"], res
    return res["kv"]


@pytest.mark.parametrize("how", ["shutdown", "sigterm"])
def test_master_waits_for_lagging_replica(pairs, how):
    def scenario(p: Pair):
        p.mc.config_set("shutdown-timeout", "300")
        p.mc.set("k", "1")
        wait_synced(p)
        p.stop_replica()
        p.mc.incr("k")
        s = send(p.mport, "SHUTDOWN") if how == "shutdown" else None
        if s is None:
            p.mproc.send_signal(signal.SIGTERM)
        deadline = time.time() + 5
        while "shutdown_in_milliseconds" not in p.mc.info("server") and time.time() < deadline:
            time.sleep(0.02)
        info = p.mc.info()
        waiting = 0 < info.get("shutdown_in_milliseconds", 0) <= 300000
        seen = {
            "waiting": waiting,
            "blocked_clients": info["blocked_clients"],
            "connected_clients": info["connected_clients"],
            "read": p.mc.get("k"),
            "shutdown_reply": read(s, 0.3) if s else None,
        }
        w = send(p.mport, "SET", "w", "1")  # writes are paused
        seen["write_while_waiting"] = read(w, 0.3)
        time.sleep(0.3)
        seen["alive_after_wait"] = p.mproc.poll() is None
        p.cont_replica()
        seen["exited"] = p.master_exited(10)
        seen["exit_code"] = p.mproc.returncode
        seen["shutdown_end"] = read(s, 2) if s else None
        seen["write_end"] = read(w, 2)
        seen["replica_k"] = p.rc.get("k")
        seen["replica_w"] = p.rc.get("w")
        log = p.log()
        seen["log"] = lines(log, r"Waiting for replicas before shutting down\.",
                            r"1 of 1 replicas are in sync when shutting down\.",
                            r"Lagging replica", r"ready to exit, bye bye")
        return seen

    seen = both_kinds(pairs, scenario)
    assert seen["waiting"] and seen["alive_after_wait"] and seen["exited"]
    assert seen["replica_k"] == "2" and seen["replica_w"] is None
    assert seen["log"][0] and seen["log"][1] and not seen["log"][2]


def test_master_waits_then_times_out(pairs):
    def scenario(p: Pair):
        p.mc.config_set("shutdown-timeout", "1")
        p.mc.set("k", "1")
        wait_synced(p)
        p.stop_replica()
        p.mc.incr("k")
        t0 = time.time()
        s = send(p.mport, "SHUTDOWN")
        seen = {"blocked": read(s, 0.3)}
        seen["exited"] = p.master_exited(10)
        elapsed = time.time() - t0
        seen["waited_about_1s"] = 0.8 <= elapsed <= 4
        seen["reply"] = read(s, 2)
        log = p.log()
        m = re.search(r"Lagging replica \S+ reported offset (\d+) behind master, "
                      r"lag=(\d+), state=(\w+)\.", log)
        seen["lagging"] = (int(m.group(1)) > 0, m.group(3)) if m else None
        seen["log"] = lines(log, r"0 of 1 replicas are in sync when shutting down\.",
                            r"ready to exit, bye bye")
        return seen

    seen = both_kinds(pairs, scenario)
    assert seen["exited"] and seen["waited_about_1s"] and seen["reply"] == b""
    assert seen["lagging"] == (True, "online") and all(seen["log"])


def test_abort_from_another_client(pairs):
    def scenario(p: Pair):
        p.stop_replica()
        p.mc.incr("k")
        s1, s2 = send(p.mport, "SHUTDOWN"), send(p.mport, "SHUTDOWN")
        seen = {"blocked": (read(s1, 0.2), read(s2, 0.2))}
        info = p.mc.info("clients")
        seen["clients"] = (info["connected_clients"], info["blocked_clients"])
        w = send(p.mport, "SET", "w", "1")
        seen["write_paused"] = read(w, 0.3)
        seen["bad"] = [call(p.mc, "SHUTDOWN", "ABORT", "NOW"),
                       call(p.mc, "SHUTDOWN", "NOSAVE", "SAVE"),
                       call(p.mc, "SHUTDOWN", "BOGUS")]
        seen["abort"] = call(p.mc, "SHUTDOWN", "ABORT")
        seen["blocked_replies"] = (read(s1, 2), read(s2, 2))
        seen["write_after"] = read(w, 2)
        seen["abort_again"] = call(p.mc, "SHUTDOWN", "ABORT")
        seen["info_after"] = "shutdown_in_milliseconds" in p.mc.info("server")
        p.cont_replica()
        time.sleep(0.5)
        seen["alive"] = p.mproc.poll() is None and p.mc.ping()
        seen["set_after"] = p.mc.set("x", "y")
        seen["log"] = lines(p.log(), r"Shutdown manually aborted\.")
        return seen

    seen = both_kinds(pairs, scenario)
    assert seen["blocked"] == (None, None) and seen["write_paused"] is None
    assert seen["abort"] in (True, "OK")
    assert seen["blocked_replies"] == (SHUTDOWN_ERR, SHUTDOWN_ERR)
    assert seen["write_after"] == b"+OK\r\n"
    assert seen["clients"] == (3, 2) and seen["alive"] and seen["log"][0]


@pytest.mark.parametrize("how", ["now", "timeout0"])
def test_no_wait(pairs, how):
    def scenario(p: Pair):
        if how == "timeout0":
            p.mc.config_set("shutdown-timeout", "0")
        p.stop_replica()
        p.mc.incr("k")
        t0 = time.time()
        s = send(p.mport, *(["SHUTDOWN", "NOW"] if how == "now" else ["SHUTDOWN"]))
        seen = {"exited": p.master_exited(5), "fast": time.time() - t0 < 1.5,
                "reply": read(s, 2)}
        log = p.log()
        seen["log"] = lines(log, r"Waiting for replicas", r"0 of 1 replicas are in sync",
                            r"ready to exit, bye bye")
        return seen

    seen = both_kinds(pairs, scenario)
    assert seen["exited"] and seen["fast"] and seen["reply"] == b""
    assert seen["log"][0] is None and seen["log"][1] and seen["log"][2]


def test_failed_save_after_wait(pairs):
    def scenario(p: Pair):
        # dbfilename is a directory: the final save's rename fails
        d = Path(p.mc.config_get("dir")["dir"])
        (d / "dump.rdb").mkdir()
        p.mc.config_set("shutdown-timeout", "300")
        p.stop_replica()
        p.mc.incr("k")
        s = send(p.mport, "SHUTDOWN", "SAVE")
        seen = {"blocked": read(s, 0.3)}
        p.cont_replica()
        seen["reply"] = read(s, 10)
        time.sleep(0.2)
        seen["alive"] = p.mproc.poll() is None
        seen["set_after"] = call(p.mc, "SET", "x", "y")
        seen["info"] = "shutdown_in_milliseconds" in p.mc.info("server")
        seen["log"] = lines(p.log(), r"1 of 1 replicas are in sync when shutting down\.",
                            r"Error trying to save the DB, can't exit\.",
                            r"Errors trying to shut down the server\. Check the logs for more "
                            r"information\.")
        return seen

    seen = both_kinds(pairs, scenario)
    assert seen["blocked"] is None and seen["reply"] == SHUTDOWN_ERR and seen["alive"]
    assert seen["set_after"] is True and all(seen["log"])


def test_shutdown_timeout_config(kv_factory, tmp_path):
    kv_r, ref_r = run_both(kv_factory, tmp_path, [
        ("CONFIG", "GET", "shutdown-timeout"),
        ("CONFIG", "SET", "shutdown-timeout", "-1"),
        ("CONFIG", "SET", "shutdown-timeout", "2147483648"),
        ("CONFIG", "SET", "shutdown-timeout", "99999999999999999999"),
        ("CONFIG", "SET", "shutdown-timeout", "-99999999999999999999"),
        ("CONFIG", "SET", "shutdown-timeout", "abc"),
        ("CONFIG", "SET", "shutdown-timeout", ""),
        ("CONFIG", "SET", "shutdown-timeout", "2147483647"),
        ("CONFIG", "GET", "shutdown-timeout"),
        ("CONFIG", "SET", "shutdown-timeout", "0"),
        ("CONFIG", "GET", "shutdown*"),
        ("SHUTDOWN", "ABORT"),
        ("SHUTDOWN", "ABORT", "NOW"),
        ("SHUTDOWN", "SAVE", "NOSAVE"),
        ("SHUTDOWN", "ABORT", "ABORT"),
    ])
    for res in (kv_r, ref_r):  # a glob's pairs come in each server's own order
        res[10] = sorted(zip(res[10][::2], res[10][1::2]))
    assert kv_r == ref_r
    assert kv_r[0] == ["shutdown-timeout", "10"]


def test_shutdown_timeout_rewrite_and_info(kv_factory, tmp_path):
    def scenario(kind):
        d = tmp_path / f"rw-{kind}"
        d.mkdir()
        conf = d / "redis.conf"
        conf.write_text("shutdown-timeout 3\n")
        if kind == "kv":
            s = kv_factory(str(conf), workdir=d)
            c, proc = s.client(decode_responses=True), None
        else:
            port = free_port()
            proc = subprocess.Popen([REDIS_SERVER, str(conf), "--port", str(port), "--dir",
                                     str(d), "--save", ""], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            c = redis.Redis(port=port, decode_responses=True, socket_timeout=10)
            deadline = time.time() + 10
            while True:
                try:
                    c.ping()
                    break
                except redis.ConnectionError:
                    assert time.time() < deadline, "redis-server did not start"
                    time.sleep(0.05)
        try:
            got = [c.config_get("shutdown-timeout"), "shutdown_in_milliseconds" in c.info()]
            c.config_set("shutdown-timeout", "25")
            c.config_rewrite()
            got.append([l for l in conf.read_text().splitlines() if l.startswith("shutdown")])
            return got
        finally:
            if proc is not None:
                stop_redis(proc, c)
            else:
                c.close()

    kv_got, ref_got = scenario("kv"), scenario("redis")
    assert kv_got == ref_got
    assert kv_got[0] == {"shutdown-timeout": "3"} and kv_got[2] == ["shutdown-timeout 25"]
