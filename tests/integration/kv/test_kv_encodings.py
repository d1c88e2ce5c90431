"""OBJECT ENCODING of brisk-kv against a real redis-server 7.0 after the
commands that create or change a value: each list of commands runs on both
servers and every reply must agree."""
from __future__ import annotations

from kvlib import run_both


def _enc(key):
    return ("OBJECT", "ENCODING", key)


def _script(text):
    """One command a line, words split on blanks (no quoting needed here)."""
    return [tuple(line.split()) for line in text.strip().splitlines() if line.strip()]


INCRBYFLOAT = _script("""
INCRBYFLOAT a 3
OBJECT ENCODING a
SET b 10
INCRBYFLOAT b 1
OBJECT ENCODING b
INCRBYFLOAT b 0.5
OBJECT ENCODING b
INCRBYFLOAT b -0.5
OBJECT ENCODING b
INCRBYFLOAT c 1e25
OBJECT ENCODING c
INCRBYFLOAT d 1e50
OBJECT ENCODING d
SET e 7 EX 1000
INCRBYFLOAT e 1
OBJECT ENCODING e
TTL e
INCR b
OBJECT ENCODING b
INCRBYFLOAT f 5
APPEND f 0
OBJECT ENCODING f
INCRBYFLOAT g 6
COPY g g2
OBJECT ENCODING g2
RENAME g g3
OBJECT ENCODING g3
GETEX g3 EX 100
OBJECT ENCODING g3
MOVE g3 1
SELECT 1
OBJECT ENCODING g3
SELECT 0
INCRBYFLOAT h 7
SET h 7
OBJECT ENCODING h
INCRBYFLOAT i 8
GETSET i 8
OBJECT ENCODING i
INCRBYFLOAT j 9
EXPIRE j 100
OBJECT ENCODING j
PERSIST j
OBJECT ENCODING j
INCRBYFLOAT k 10
DEBUG RELOAD
OBJECT ENCODING k
INCRBYFLOAT l 11
LPUSH l x
INCRBYFLOAT m 12
SETRANGE m 0 1
OBJECT ENCODING m
""")


def test_incrbyfloat_result_is_embstr(kv_factory, tmp_path):
    got, want = run_both(kv_factory, tmp_path, INCRBYFLOAT)
    assert got == want
    assert want[1] == "embstr" and want.count("embstr") >= 8
