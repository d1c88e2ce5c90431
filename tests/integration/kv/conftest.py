"""Fixtures for the brisk-kv black-box tests.

`kv_factory(*args)` starts the real binary (BRISK_BIN_DIR/brisk-kv, default
/work/main/build/bin) on a free loopback port in the test's temporary
directory and waits until it answers PING; at teardown every server is
stopped with SIGTERM (SIGKILL after 5 s). A test fails if a server exits
non-zero on its own, has to be killed, or printed a sanitizer report.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import redis

from kvlib import KvServer, start_redis, stop_redis


@pytest.fixture
def kv_factory(tmp_path):
    started: list[KvServer] = []

    def make(*args: str, workdir: Path | None = None, start: bool = True) -> KvServer:
        s = KvServer(workdir or tmp_path, list(args))
        started.append(s)
        if start:
            s.start()
        return s

    yield make
    errors = []
    for s in started:
        if s.proc is None:
            continue
        if s.proc.poll() is None:
            rc = s.stop()
            if rc != 0 and not s.expect_exit:
                errors.append(f"brisk-kv exited with {rc}: {s.output()[-2000:]}")
        elif not s.log.closed:
            s.log.close()
        try:
            s.check_clean()
        except AssertionError as e:
            errors.append(str(e))
    assert not errors, "\n".join(errors)


@pytest.fixture
def kv(kv_factory) -> KvServer:
    return kv_factory()


@pytest.fixture
def r(kv) -> redis.Redis:
    c = kv.client(decode_responses=True)
    yield c
    c.close()


# A real redis-server 7 on a free port (a redis-py client, bytes replies):
# the reference every brisk-kv reply is compared with, side by side.
@pytest.fixture
def reference(tmp_path):
    proc, c = start_redis(tmp_path)
    yield c
    stop_redis(proc, c)
