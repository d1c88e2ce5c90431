"""Hostile-but-legal arguments to the command families merged together
(zset ranges, bitmaps, geo, SORT, LCS, RESTORE, ...), run against the
sanitizer build by the asan pass: each case once crashed or tripped
ASan/UBSan. Replies are compared with a real redis-server where Redis
defines them; everywhere the server must answer and stay alive.
"""
from __future__ import annotations

import pytest
import redis

LLONG_MIN = "-9223372036854775808"
LLONG_MAX = "9223372036854775807"


def both(b, ref, *cmd):
    """Run cmd on brisk-kv and on the reference; return the two replies
    (an error becomes its message)."""
    out = []
    for c in (b, ref):
        try:
            out.append(c.execute_command(*cmd))
        except redis.ResponseError as e:
            out.append("ERR:" + str(e))
    return out


@pytest.fixture
def rb(kv):
    c = kv.client(decode_responses=False)
    yield c
    c.close()


# ZRANGEBYLEX z - + LIMIT -9223372036854775808 ... decremented the offset
# past LLONG_MIN (UBSan: signed overflow in t_zset.c range_by); a negative
# offset also returned the whole range where Redis returns nothing.
@pytest.mark.parametrize("cmd", [
    ["ZRANGEBYLEX", "z", "-", "+", "LIMIT", LLONG_MIN, LLONG_MIN],
    ["ZRANGEBYLEX", "z", "-", "+", "LIMIT", "-1", "1"],
    ["ZREVRANGEBYLEX", "z", "+", "-", "LIMIT", LLONG_MIN, "5"],
    ["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", LLONG_MIN, LLONG_MAX],
    ["ZREVRANGEBYSCORE", "z", "+inf", "-inf", "LIMIT", "-1", "-1"],
    ["ZRANGE", "z", "0", "10", "BYSCORE", "LIMIT", LLONG_MIN, "1"],
    ["ZRANGE", "z", "0", "10", "BYSCORE", "LIMIT", "0", LLONG_MIN],
    ["ZRANGESTORE", "zd", "z", "0", "10", "BYSCORE", "LIMIT", LLONG_MIN, "1"],
    ["ZRANGEBYLEX", "z", "-", "+", "LIMIT", "1", "-5"],
])
def test_zrange_limit_extreme_offset(rb, reference, kv, cmd):
    for c in (rb, reference):
        c.zadd("z", {"a": 1, "b": 2, "c": 3})
    got, want = both(rb, reference, *cmd)
    assert got == want
    assert rb.ping()
