"""SORT and SORT_RO side by side with a real redis-server 7: lists, sets and
sorted sets, BY/GET patterns (hash fields, '#', constants), LIMIT, ASC/DESC,
ALPHA, STORE, the errors, and hostile LIMIT values."""
from __future__ import annotations

import random

from kv_sidebyside import both, pair, same  # noqa: F401  (pair is a fixture)


def rand_value(rng: random.Random, numeric: bool):
    if numeric:
        return rng.choice([
            str(rng.randint(-1000, 1000)),
            repr(rng.uniform(-1e6, 1e6)),
            f"{rng.uniform(-10, 10):.3f}",
            str(rng.randint(-2**63, 2**63 - 1)),
            rng.choice(["1e10", "0x1A", " 7", "-0", "inf", "-inf", "", "3.0", "1e-5"]),
        ])
    return rng.choice(["a", "b", "B", "aa", "ab", "zz", "Z", "10", "9", "é", "a b", "", "x" * 40,
                       "\x01", "abc\x00def", "abc"]) + rng.choice(["", str(rng.randint(0, 99))])


def build(pair, rng, n=60):
    """A list, a numeric set, a sorted set and the weight keys and hashes."""
    items = [str(i) for i in range(n)]
    both(pair, "RPUSH", "lst", *items)
    both(pair, "RPUSH", "lst", "3", "3", "x-not-number")  # duplicates, and one bad double
    both(pair, "RPUSH", "nums", *[rand_value(rng, True) for _ in range(n)])
    both(pair, "RPUSH", "words", *[rand_value(rng, False) for _ in range(n)])
    both(pair, "SADD", "iset", *items)
    zargs = []
    for i in range(n):
        zargs += [str(rng.randint(-5, 5)), f"m{i}"]
    both(pair, "ZADD", "zs", *zargs)
    for i in range(n):
        if rng.random() < 0.85:
            both(pair, "SET", f"w_{i}", str(rng.randint(0, 30)))
            both(pair, "SET", f"w_m{i}", repr(rng.uniform(0, 5)))
        if rng.random() < 0.85:
            both(pair, "HSET", f"h_{i}", "f", rand_value(rng, False), "n", str(rng.randint(0, 9)))
            both(pair, "HSET", f"h_m{i}", "f", rand_value(rng, False), "n", str(rng.randint(0, 9)))
        both(pair, "SET", f"name_{i}", f"name-{i}")
    both(pair, "SET", "w_x-not-number", "5")
    both(pair, "LPUSH", "w_7", "not a string")  # a BY key of the wrong type


def random_sort(rng: random.Random, key: str, store: bool):
    cmd = [rng.choice(["SORT", "SORT_RO"]) if not store else "SORT", key]
    groups = []
    r = rng.random()
    if r < 0.25:
        groups.append(["BY", rng.choice(["w_*", "w_*x", "h_*->n", "h_*->f", "h_*->", "*"])])
    elif r < 0.35:
        groups.append(["BY", rng.choice(["nosort", "constant", "h_->n"])])
    for _ in range(rng.choice([0, 0, 1, 2, 3])):
        groups.append(["GET", rng.choice(["#", "w_*", "h_*->f", "h_*->n", "name_*", "nokey_*",
                                          "const", "h_*->"])])
    if rng.random() < 0.4:
        groups.append(["LIMIT", str(rng.randint(-3, 70)), str(rng.randint(-3, 70))])
    if rng.random() < 0.5:
        groups.append([rng.choice(["ASC", "DESC", "asc", "desc"])])
    if rng.random() < 0.5:
        groups.append(["ALPHA"])
    if store:
        groups.append(["STORE", rng.choice(["dst", key])])
    rng.shuffle(groups)
    return cmd + [a for g in groups for a in g]


def tie_order_unspecified(cmd) -> bool:
    """ALPHA BY <pattern> leaves equal values in the order the elements were
    loaded (then moved by the sort): for a sorted set Redis walks its hash
    table, whose order is random per process."""
    up = [a.upper() for a in cmd]
    if "ALPHA" not in up or "BY" not in up:
        return False
    by = cmd[up.index("BY") + 1]
    if "*" not in by:
        return False
    return cmd[1] == "zs"


def test_random_sorts_match_redis(pair):
    rng = random.Random(17)
    build(pair, rng)
    b2, r2 = pair[0], pair[1]
    for _ in range(1500):
        key = rng.choice(["lst", "nums", "words", "zs", "iset", "nokey"])
        cmd = random_sort(rng, key, store=False)
        if not tie_order_unspecified(cmd):
            same(pair, *cmd)
        elif "LIMIT" not in [a.upper() for a in cmd]:
            # the same elements, the same length
            want, got = r2.call(*cmd), b2.call(*cmd)
            assert sorted(got.split(b"\r\n")) == sorted(want.split(b"\r\n")), cmd


def test_random_sort_store_matches_redis(pair):
    rng = random.Random(19)
    build(pair, rng)
    for i in range(300):
        key = rng.choice(["lst", "nums", "words", "zs", "iset", "nokey"])
        cmd = random_sort(rng, key, store=True)
        both(pair, *cmd)
        if tie_order_unspecified(cmd):
            # same length; and rebuild the source that may have been replaced
            same(pair, "LLEN", "dst")
            both(pair, "DEL", "lst", "nums", "words", "zs", "iset")
            build(pair, rng, n=30)
        else:
            same(pair, "LRANGE", "dst", "0", "-1")
        same(pair, "EXISTS", "dst")
        if i % 25 == 0:  # the stored source was replaced: rebuild it
            both(pair, "DEL", "lst", "nums", "words", "zs", "iset")
            build(pair, rng, n=30)


def test_sort_limit_by_with_equal_values(pair):
    # LIMIT with BY sorts partially (Redis's own quicksort): equal values come
    # out in its order, in both directions
    rng = random.Random(23)
    both(pair, "RPUSH", "tied", *[f"e{i}" for i in range(300)])
    both(pair, "SADD", "tiedset", *[str(i) for i in range(300)])
    for i in range(300):
        both(pair, "SET", f"tw_e{i}", rng.choice(["a", "b", "c"]))
        both(pair, "SET", f"tw_{i}", rng.choice(["a", "b", "c"]))
    for _ in range(60):
        a, b = rng.randint(0, 300), rng.randint(1, 300)
        for key, pat in (("tied", "tw_*"), ("tiedset", "tw_*")):
            same(pair, "SORT", key, "BY", pat, "ALPHA", "LIMIT", str(a), str(b))
            same(pair, "SORT", key, "BY", pat, "ALPHA", "DESC", "LIMIT", str(a), str(b))
        same(pair, "SORT", "tied", "BY", "tw_*", "ALPHA")


def test_sort_sets_with_constant_by(pair):
    # an integer set lists in intset order; STORE sorts any set
    both(pair, "SADD", "ints", "5", "-3", "100", "0", "42", "7")
    same(pair, "SORT", "ints", "BY", "nosort")
    same(pair, "SORT", "ints", "BY", "nosort", "LIMIT", "1", "3")
    same(pair, "SORT", "ints", "BY", "nosort", "GET", "#", "GET", "x_*")
    both(pair, "SADD", "strs", "a", "c", "b", "aa", "z", "10")
    both(pair, "SORT", "strs", "BY", "nosort", "STORE", "out")
    same(pair, "LRANGE", "out", "0", "-1")
    both(pair, "SORT", "strs", "BY", "nosort", "DESC", "LIMIT", "1", "2", "STORE", "out")
    same(pair, "LRANGE", "out", "0", "-1")


def test_sort_basics(pair):
    cmds = [
        ["RPUSH", "l", "3", "1", "2", "10", "1.5", "-7"],
        ["SORT", "l"],
        ["SORT", "l", "DESC"],
        ["SORT", "l", "ALPHA"],
        ["SORT", "l", "ALPHA", "DESC", "LIMIT", "1", "2"],
        ["SORT", "l", "BY", "nosort"],
        ["SORT", "l", "BY", "nosort", "DESC", "LIMIT", "1", "3"],
        ["SORT", "l", "BY", "nosort", "BY", "w_*"],
        ["SORT", "l", "LIMIT", "0", "0"],
        ["SORT", "l", "LIMIT", "-5", "2"],
        ["SORT", "l", "LIMIT", "2", "-1"],
        ["SORT", "l", "LIMIT", "6", "1"],
        ["SORT", "l", "STORE", "out"],
        ["LRANGE", "out", "0", "-1"],
        ["TYPE", "out"],
        ["SORT", "l", "LIMIT", "10", "10", "STORE", "out"],
        ["EXISTS", "out"],
        ["SET", "out", "x"],
        ["EXPIRE", "out", "100"],
        ["SORT", "l", "STORE", "out"],
        ["TTL", "out"],
        ["SORT", "nokey", "STORE", "out"],
        ["EXISTS", "out"],
        ["SORT", "nokey"],
        ["SORT", "nokey", "BY", "nosort", "LIMIT", "1", "1"],
        ["ZADD", "z", "1", "a", "5", "b", "2", "c", "10", "d", "3", "e"],
        ["SORT", "z", "ALPHA", "DESC"],
        ["SORT", "z", "BY", "nosort"],
        ["SORT", "z", "BY", "nosort", "DESC"],
        ["SORT", "z", "BY", "nosort", "ASC", "LIMIT", "1", "2"],
        ["SORT", "z", "BY", "nosort", "DESC", "LIMIT", "1", "2"],
        ["SORT", "z", "BY", "nosort", "LIMIT", "5", "10"],
        ["SORT", "z", "BY", "nosort", "LIMIT", "-10", "100"],
        ["SORT", "z"],
        ["RPUSH", "g", "a"],
        ["SET", "x:a->", "100"],
        ["SORT", "g", "BY", "num", "GET", "x:*->"],
        ["SORT_RO", "g", "BY", "nosort", "GET", "x:*->"],
        ["HSET", "x:a", "", "empty-field"],
        ["SORT", "g", "GET", "x:*->", "GET", "#", "GET", "x:*"],
        ["SORT", "l", "BY", "w_*", "GET", "#"],
        ["SET", "w_1", "not-a-double"],
        ["SORT", "l", "BY", "w_*"],
        ["SORT", "l", "BY", "w_*", "ALPHA"],
        ["SORT", "l", "BY", "w_*", "STORE", "out"],
    ]
    for cmd in cmds:
        same(pair, *cmd) if cmd[0] in ("SORT", "SORT_RO", "LRANGE", "EXISTS", "TYPE", "TTL") \
            else both(pair, *cmd)


def test_sort_errors_match_redis(pair):
    both(pair, "RPUSH", "l", "1", "x")
    both(pair, "SET", "s", "x")
    both(pair, "HSET", "h", "f", "v")
    for cmd in (["SORT", "l"],
                ["SORT", "s"],
                ["SORT", "h"],
                ["SORT", "l", "LIMIT", "1"],
                ["SORT", "l", "LIMIT", "a", "1"],
                ["SORT", "l", "LIMIT", "1", "1.5"],
                ["SORT", "l", "LIMIT", "0", "9223372036854775808"],
                ["SORT", "l", "BY"],
                ["SORT", "l", "GET"],
                ["SORT", "l", "STORE"],
                ["SORT", "l", "bogus"],
                ["SORT", "s", "bogus"],
                ["SORT_RO", "l", "STORE", "x"],
                ["SORT_RO", "foolist", "STORE", "bar"],
                ["SORT", "l", "ALPHA", "STORE", "s"],
                ["TYPE", "s"],
                ["SORT"]):
        same(pair, *cmd)


def test_sort_hostile_limits(pair, kv):
    both(pair, "RPUSH", "L", "2", "1", "0")
    both(pair, "ZADD", "Z", "1", "a", "2", "b", "3", "c")
    both(pair, "SADD", "S", "1", "2", "3")
    big, small = "9223372036854775807", "-9223372036854775808"
    for key in ("L", "Z", "S", "nokey"):
        for a, b in ((0, big), (big, big), (small, small), (small, big), (big, small), (2, big),
                     (1, small), (small, 1)):
            for extra in ([], ["BY", "nosort"], ["BY", "a"], ["DESC"], ["BY", "nosort", "DESC"],
                          ["ALPHA", "GET", "#", "GET", "#"]):
                same(pair, "SORT_RO", key, "LIMIT", str(a), str(b), *extra)
                both(pair, "SORT", key, "LIMIT", str(a), str(b), *extra, "STORE", "d")
                same(pair, "LRANGE", "d", "0", "-1")
    # many GET patterns on many elements
    both(pair, "RPUSH", "many", *[str(i) for i in range(2000)])
    same(pair, "SORT", "many", "LIMIT", "1990", big, *(["GET", "#"] * 50))
    assert kv.client().ping()


def test_sort_command_getkeys(pair):
    for cmd in (["SORT", "abc", "STORE", "def"],
                ["SORT", "abc", "STORE"],
                ["SORT", "abc", "STORE", "GET", "x"],
                ["SORT", "abc", "GET", "STORE", "x"],
                ["SORT", "abc", "STORE", "invalid", "STORE", "stillbad", "STORE", "def"],
                ["SORT", "abc", "LIMIT", "STORE", "x", "STORE", "y"],
                ["SORT", "abc", "BY", "STORE", "x"],
                ["SORT_RO", "abc"],
                ["SORT_RO", "abc", "STORE", "x"]):
        same(pair, "COMMAND", "GETKEYS", *cmd)
