"""Redis 7.0's software watchdog (watchdog-period) and crash report, as the
suite's integration/logging and integration/replication check them: the
watchdog's line and stack trace when one event-loop iteration blocks, no
line from an idle server, blocking calls that go on after its SIGALRM
(EINTR), a replica whose full sync survives it, and a crash report on
SIGSEGV / SIGABRT after which the process still dies by that signal."""
from __future__ import annotations

import signal
import subprocess
import time

import pytest
import redis

from kvlib import KV_BIN
from test_kv_replication import info, wait_for, wait_link_up

SANITIZED = "libasan" in subprocess.run(["ldd", KV_BIN], capture_output=True, text=True).stdout
WD_LINE = "WATCHDOG TIMER EXPIRED"


def debug_kv(kv_factory, *args):
    return kv_factory("--enable-debug-command", "yes", *args)


def error_text(c, *cmd):
    try:
        return ("ok", c.execute_command(*cmd))
    except redis.ResponseError as e:
        return ("err", str(e))


def test_watchdog_period_values_as_redis(kv_factory, reference):
    c = debug_kv(kv_factory).client()
    for v in ("1", "100", "199", "200", "250", "-1", "abc", "2147483648", "2147483647", "0"):
        got = error_text(c, "CONFIG", "SET", "watchdog-period", v)
        want = error_text(reference, "CONFIG", "SET", "watchdog-period", v)
        assert got == want, v
        assert c.config_get("watchdog-period") == reference.config_get("watchdog-period"), v
    # hidden, as in Redis: a pattern does not show it, the exact name does
    assert "watchdog-period" not in c.config_get("watch*")
    assert c.config_get("watch*") == reference.config_get("watch*")
    for name in ("crash-log-enabled", "crash-memcheck-enabled"):
        assert c.config_get(name) == {name: "yes"}
        assert error_text(c, "CONFIG", "SET", name, "maybe") == \
            error_text(reference, "CONFIG", "SET", name, "maybe")
        assert c.config_set(name, "no") and c.config_get(name) == {name: "no"}


def test_watchdog_logs_a_blocked_iteration_with_its_stack(kv_factory):
    kv = debug_kv(kv_factory)
    c = kv.client()
    c.config_set("watchdog-period", 200)
    t0 = time.time()
    assert c.execute_command("DEBUG", "SLEEP", "1") == b"OK"
    # the SIGALRM interrupted the sleep (EINTR): it went on to its end
    assert time.time() - t0 >= 0.95
    log = kv.output()
    assert log.count(WD_LINE) == 1, log  # one-shot per blocked iteration
    trace = log[log.index(WD_LINE):]
    assert "STACK TRACE" in trace and "debug_command" in trace, trace
    assert c.ping()


def test_watchdog_quiet_when_idle_and_off_when_zero(kv_factory):
    kv = debug_kv(kv_factory, "--hz", "1")  # the idle wait can be 1 s long
    c = kv.client()
    c.config_set("watchdog-period", 200)
    for _ in range(10):
        c.set("k", "v")
        time.sleep(0.15)
    time.sleep(1.2)
    assert WD_LINE not in kv.output()
    c.config_set("watchdog-period", 0)
    assert c.config_get("watchdog-period") == {"watchdog-period": "0"}
    c.execute_command("DEBUG", "SLEEP", "0.5")
    time.sleep(0.3)
    assert WD_LINE not in kv.output()
    assert c.ping()


def test_watchdog_during_a_diskless_load_keeps_the_sync(kv_factory):
    """The suite's "replica can handle EINTR if use diskless load": the
    replica's loop is blocked (DEBUG SLEEP) again and again while a slow
    diskless full sync streams in, the watchdog fires each time, and the
    sync goes on: one full sync, no reconnection, every key there."""
    master = debug_kv(kv_factory)
    m = master.client()
    m.execute_command("DEBUG", "POPULATE", "100", "master", "10000")
    m.config_set("repl-diskless-sync", "yes")
    m.config_set("repl-diskless-sync-delay", 0)
    m.config_set("rdb-key-save-delay", 20000)  # 2 s of transfer
    replica = debug_kv(kv_factory)
    r = replica.client()
    r.config_set("repl-diskless-load", "on-empty-db")
    r.config_set("watchdog-period", 200)
    r.replicaof("127.0.0.1", master.port)
    wait_for(lambda: "Loading DB in memory" in replica.output(), 10, "load start")
    fired = 0
    while info(r)["master_link_status"] != "up" and fired < 6:
        r.execute_command("DEBUG", "SLEEP", "0.3")
        fired += 1
    assert replica.output().count(WD_LINE) >= 2, replica.output()[-3000:]
    m.config_set("rdb-key-save-delay", 0)
    wait_link_up(r)
    assert r.dbsize() == 100
    assert m.info("stats")["sync_full"] == 1
    log = replica.output()
    assert "Reconnecting" not in log and "Master link to" not in log, log[-3000:]


@pytest.mark.skipif(SANITIZED, reason="the sanitizer build leaves SIGSEGV to ASan's report")
@pytest.mark.parametrize("how", ["segfault", "sigabrt", "sigsegv"])
def test_crash_report_then_death_by_the_signal(kv_factory, how):
    kv = debug_kv(kv_factory)
    kv.expect_exit = True
    c = kv.client()
    if how == "segfault":
        with pytest.raises(redis.ConnectionError):
            c.execute_command("DEBUG", "SEGFAULT")
        sig = signal.SIGSEGV
    else:
        sig = signal.SIGABRT if how == "sigabrt" else signal.SIGSEGV
        kv.proc.send_signal(sig)
    assert kv.proc.wait(10) == -sig
    log = kv.output()
    assert f"crashed by signal: {int(sig)}" in log, log
    assert "------ STACK TRACE ------" in log and "BUG REPORT END" in log, log
    if how == "segfault":
        assert "Accessing address: 0x" in log and "debug_command" in log, log
    else:
        assert "Killed by PID:" in log, log


@pytest.mark.skipif(SANITIZED, reason="the sanitizer build installs no crash handler")
def test_no_crash_report_when_crash_log_disabled(kv_factory):
    kv = debug_kv(kv_factory, "--crash-log-enabled", "no")
    kv.expect_exit = True
    kv.proc.send_signal(signal.SIGABRT)
    assert kv.proc.wait(10) == -signal.SIGABRT
    assert "STACK TRACE" not in kv.output()
