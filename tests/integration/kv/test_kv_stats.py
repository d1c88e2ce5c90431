"""INFO's measured figures: commandstats usec (every call of slow commands
timed, one in 16 of @fast ones, scaled) and instantaneous_ops_per_sec /
instantaneous_input_kbps / instantaneous_output_kbps (rates over the last
16 cron ticks)."""
from __future__ import annotations

import threading
import time


def test_commandstats_usec(kv_factory):
    r = kv_factory("--enable-debug-command", "yes").client(decode_responses=True)
    r.execute_command("DEBUG", "SLEEP", "0.2")
    st = r.info("commandstats")["cmdstat_debug"]
    assert st["calls"] == 1
    assert 190_000 <= st["usec"] <= 2_000_000
    assert abs(st["usec_per_call"] - st["usec"]) < 1
    p = r.pipeline(transaction=False)
    for i in range(5000):
        p.set(f"k{i}", "v")
    p.execute()
    st = r.info("commandstats")["cmdstat_set"]
    assert st["calls"] == 5000
    assert 0 < st["usec"] < 5_000_000
    assert 0 < st["usec_per_call"] < 1000
    r.config_resetstat()
    assert "cmdstat_set" not in r.info("commandstats")


def test_instantaneous_rates(kv):
    c = kv.client()
    assert c.info("stats")["instantaneous_ops_per_sec"] == 0
    stop = threading.Event()

    def load():
        w = kv.client()
        p = w.pipeline(transaction=False)
        while not stop.is_set():
            for i in range(200):
                p.set(f"x{i}", "y" * 100)
            p.execute()
        w.close()

    t = threading.Thread(target=load)
    t.start()
    try:
        time.sleep(2.0)  # 16 samples at hz 10 cover 1.6 s
        info = c.info("stats")
    finally:
        stop.set()
        t.join()
    assert info["instantaneous_ops_per_sec"] > 500
    assert info["instantaneous_input_kbps"] > 50
    assert info["instantaneous_output_kbps"] > 1
    # and it falls back once the load is gone (to this loop's own INFO calls)
    deadline = time.time() + 5
    while c.info("stats")["instantaneous_ops_per_sec"] > 20 and time.time() < deadline:
        time.sleep(0.2)
    assert c.info("stats")["instantaneous_ops_per_sec"] <= 20
    c.close()
