"""GEO commands side by side with a real redis-server 7: the same commands go
to both and the raw replies (RESP2 and RESP3 bytes) must be equal, the geo
sets' scores included, so a geo set written by one server reads the same in
the other."""
from __future__ import annotations

import math
import random

from kv_sidebyside import both, pair, same  # noqa: F401  (pair is a fixture)


def rand_point(rng: random.Random, lat_limit=85.05112878):
    return rng.uniform(-180, 180), rng.uniform(-lat_limit, lat_limit)


def fill(pair, rng, key, n, lat_limit=85.05112878):
    args = []
    for i in range(n):
        lon, lat = rand_point(rng, lat_limit)
        args += [repr(lon), repr(lat), f"m{i}"]
    both(pair, "GEOADD", key, *args)


# ---- tests ----

def test_geoadd_scores_are_redis_geohashes(pair):
    rng = random.Random(1)
    fill(pair, rng, "pts", 400)
    # the limits themselves, and the corners
    both(pair, "GEOADD", "pts", "180", "85.05112878", "ne", "-180", "-85.05112878", "sw",
         "0", "0", "zero", "-0", "-0", "negzero", "179.99999999", "-85", "edge")
    same(pair, "ZRANGE", "pts", "0", "-1", "WITHSCORES")
    members = [f"m{i}" for i in range(0, 400, 7)] + ["ne", "sw", "zero", "negzero", "edge", "nope"]
    same(pair, "GEOPOS", "pts", *members)
    same(pair, "GEOHASH", "pts", *members)
    for unit in ("m", "km", "ft", "mi", "KM"):
        same(pair, "GEODIST", "pts", "m1", "m2", unit)
        same(pair, "GEODIST", "pts", "ne", "sw", unit)
    same(pair, "GEODIST", "pts", "m3", "m3")
    same(pair, "GEODIST", "pts", "m3", "nope")
    same(pair, "GEODIST", "nokey", "a", "b")
    same(pair, "GEOPOS", "nokey", "a", "b")
    same(pair, "GEOHASH", "nokey", "a")


def test_geoadd_options(pair):
    for cmd in (["GEOADD", "g", "13.361389", "38.115556", "Palermo"],
                ["GEOADD", "g", "NX", "15", "37", "Palermo", "15.087269", "37.502669", "Catania"],
                ["GEOADD", "g", "XX", "15", "37", "Palermo", "1", "1", "new"],
                ["GEOADD", "g", "CH", "XX", "16", "37", "Palermo", "1", "1", "new"],
                ["GEOADD", "g", "CH", "16", "37", "Palermo", "1", "1", "new"],
                ["GEOADD", "g", "CH", "NX", "16", "37", "Palermo", "2", "2", "new2"],
                ["GEOADD", "g", "xx", "nx", "1", "1", "a"],
                ["GEOADD", "g", "ch", "xx", "foo", "1", "1", "a"],
                ["GEOADD", "g", "nx", "ch", "ch"],
                ["GEOADD", "g", "1", "1", "a", "foo", "bar", "b"],
                ["GEOADD", "g", "181", "1", "a"],
                ["GEOADD", "g", "1", "85.06", "a"],
                ["GEOADD", "g", "1", "-85.05112879", "a"],
                ["GEOADD", "g", "1e400", "1", "a"],
                ["GEOADD", "g", "nan", "1", "a"],
                ["GEOADD", "g", " 1", "1", "a"],
                ["GEOADD", "g", "1", "2"],
                ["GEOADD", "xxkey", "XX", "1", "1", "a"],
                ["EXISTS", "xxkey"],
                ["SET", "str", "x"],
                ["GEOADD", "str", "1", "1", "a"],
                ["GEOPOS", "str", "a"],
                ["GEODIST", "str", "a", "b"],
                ["GEODIST", "g", "a", "b", "parsec"],
                ["GEODIST", "g", "a", "b", "km", "extra"],
                ["GEOHASH", "str", "a"],
                ["GEORADIUS", "str", "1", "1", "1", "km"],
                ["ZRANGE", "g", "0", "-1", "WITHSCORES"]):
        both(pair, *cmd)


def test_geopos_of_scores_not_written_by_geoadd(pair):
    # any sorted set can be read as a geo set
    both(pair, "ZADD", "z", "0", "a", "-1", "b", "1e20", "c", "4503599627370495", "d",
         "4503599627370496", "e", "-inf", "f", "inf", "g", "1.5", "h", "9007199254740993", "i")
    ms = ["a", "b", "c", "d", "e", "f", "g", "h", "i"]
    same(pair, "GEOPOS", "z", *ms)
    same(pair, "GEOHASH", "z", *ms)
    same(pair, "GEODIST", "z", "a", "d", "km")
    same(pair, "GEORADIUS", "z", "0", "0", "20000", "km", "WITHCOORD", "WITHHASH", "WITHDIST")


def random_query(rng: random.Random, key: str, members: list[str]):
    unit = rng.choice(["m", "km", "ft", "mi"])
    scale = {"m": 1, "km": 1000, "ft": 0.3048, "mi": 1609.34}[unit]
    big = rng.random() < 0.1
    r_m = rng.uniform(10, 5_000_000 if big else 300_000)
    radius = f"{r_m / scale:.6g}"
    width, height = f"{rng.uniform(10, 2 * r_m) / scale:.6g}", f"{rng.uniform(10, 2 * r_m) / scale:.6g}"
    lon, lat = rand_point(rng)
    kind = rng.choice(["GEORADIUS", "GEORADIUS_RO", "GEORADIUSBYMEMBER", "GEORADIUSBYMEMBER_RO",
                       "GEOSEARCH", "GEOSEARCH"])
    if kind.startswith("GEORADIUSBYMEMBER"):
        cmd = [kind, key, rng.choice(members), radius, unit]
    elif kind.startswith("GEORADIUS"):
        cmd = [kind, key, repr(lon), repr(lat), radius, unit]
    else:
        cmd = [kind, key]
        if rng.random() < 0.5:
            cmd += ["FROMMEMBER", rng.choice(members)]
        else:
            cmd += ["FROMLONLAT", repr(lon), repr(lat)]
        if rng.random() < 0.5:
            cmd += ["BYRADIUS", radius, unit]
        else:
            cmd += ["BYBOX", width, height, unit]
    opts = []
    for o in ("WITHDIST", "WITHCOORD", "WITHHASH"):
        if rng.random() < 0.4:
            opts.append([o])
    r = rng.random()
    if r < 0.3:
        opts.append(["ASC"])
    elif r < 0.5:
        opts.append(["DESC"])
    if rng.random() < 0.4:
        opts.append(["COUNT", str(rng.randint(1, 30))])
        if rng.random() < 0.4:
            opts.append(["ANY"])
    rng.shuffle(opts)  # options come in any order
    return cmd + [a for o in opts for a in o]


def test_random_searches_match_redis(pair):
    rng = random.Random(7)
    fill(pair, rng, "world", 3000)
    members = [f"m{i}" for i in range(3000)]
    for _ in range(400):
        same(pair, *random_query(rng, "world", members))


def test_random_dense_searches_match_redis(pair):
    # many points in a small area: results with hundreds of members, ties of
    # equal distance from duplicate coordinates
    rng = random.Random(11)
    args = []
    for i in range(2000):
        lon, lat = 12.5 + rng.uniform(-1, 1), 41.9 + rng.uniform(-1, 1)
        if i % 50 == 0:
            lon, lat = 12.5, 41.9
        args += [repr(lon), repr(lat), f"p{i}"]
    both(pair, "GEOADD", "rome", *args)
    for _ in range(150):
        lon, lat = 12.5 + rng.uniform(-1.2, 1.2), 41.9 + rng.uniform(-1.2, 1.2)
        r_km = f"{rng.uniform(0.5, 60):.4f}"
        same(pair, "GEORADIUS", "rome", repr(lon), repr(lat), r_km, "km", "WITHDIST", "ASC")
        same(pair, "GEOSEARCH", "rome", "FROMLONLAT", repr(lon), repr(lat), "BYBOX", r_km, r_km,
             "km", "WITHCOORD")
        same(pair, "GEOSEARCH", "rome", "FROMMEMBER", f"p{rng.randrange(2000)}", "BYRADIUS",
             r_km, "km", "COUNT", "5", "DESC", "WITHHASH")


def test_equal_distances_with_count(pair):
    # COUNT sorts partially (Redis's own quicksort): equal distances come out
    # in its order
    rng = random.Random(29)
    args = []
    for i in range(400):
        spot = rng.choice([(12.5, 41.9), (12.51, 41.9), (12.5, 41.91), (12.49, 41.89)])
        args += [repr(spot[0]), repr(spot[1]), f"t{i}"]
    both(pair, "GEOADD", "ties", *args)
    for count in (1, 2, 5, 7, 8, 40, 41, 100, 399, 400, 401):
        for order in ("ASC", "DESC"):
            same(pair, "GEORADIUS", "ties", "12.5", "41.9", "10", "km", "COUNT", str(count), order)
            same(pair, "GEOSEARCH", "ties", "FROMMEMBER", "t3", "BYBOX", "20", "20", "km",
                 "COUNT", str(count), order, "WITHDIST")
        same(pair, "GEORADIUS", "ties", "12.5", "41.9", "10", "km", "COUNT", str(count))


def test_poles_and_antimeridian(pair):
    rng = random.Random(3)
    both(pair, "GEOADD", "edge", "179.5", "36", "a", "-179.5", "36", "b", "45", "65", "c",
         "-135", "85.05", "d", "0", "85.05112878", "e", "0", "-85.05112878", "f",
         "-0.15307903289794921875", "85", "g", "0.3515625", "85.00019260486917005437", "h")
    for lon, lat in ((179, 37), (-179, 37), (0, 85), (0, -85), (180, 0), (-180, 0)):
        for r in ("10", "400", "5009431", "20000000"):
            same(pair, "GEOSEARCH", "edge", "FROMLONLAT", str(lon), str(lat), "BYBOX", r, r, "km",
                 "ASC", "WITHDIST")
            same(pair, "GEORADIUS", "edge", str(lon), str(lat), r, "km", "WITHCOORD")
    for m in "abcdefgh":
        same(pair, "GEORADIUSBYMEMBER", "edge", m, f"{rng.uniform(1, 6000):.3f}", "km")


def test_store_and_storedist(pair, kv, reference):
    rng = random.Random(5)
    fill(pair, rng, "src", 500, lat_limit=70)
    brisk = kv.client()
    for i in range(60):
        lon, lat = rand_point(rng, 70)
        r = f"{rng.uniform(100, 3000):.3f}"
        dist = rng.random() < 0.5
        extra = ["COUNT", str(rng.randint(1, 50))] if rng.random() < 0.5 else []
        extra += [rng.choice(["ASC", "DESC"])] if rng.random() < 0.5 else []
        if i % 3 == 0:
            cmd = ["GEORADIUS", "src", repr(lon), repr(lat), r, "km",
                   "STOREDIST" if dist else "STORE", "dst"] + extra
        elif i % 3 == 1:
            cmd = ["GEOSEARCHSTORE", "dst", "src", "FROMLONLAT", repr(lon), repr(lat),
                   "BYBOX", r, r, "km"] + extra + (["STOREDIST"] if dist else [])
        else:
            cmd = ["GEORADIUSBYMEMBER", "src", f"m{rng.randrange(500)}", r, "km",
                   "STOREDIST" if dist else "STORE", "dst"] + extra
        both(pair, *cmd)
        want = reference.zrange("dst", 0, -1, withscores=True)
        got = brisk.zrange("dst", 0, -1, withscores=True)
        # the same doubles (compared as numbers: score formatting is not geo's)
        assert got == want, cmd
    # an empty result deletes the destination
    both(pair, "GEORADIUS", "src", "0", "89", "1", "m", "STORE", "dst")
    both(pair, "EXISTS", "dst")
    both(pair, "SET", "dst2", "x")
    both(pair, "GEORADIUS", "nokey", "0", "0", "1", "m", "STORE", "dst2")
    both(pair, "EXISTS", "dst2")
    # the source as its own destination
    both(pair, "GEORADIUS", "src", "0", "0", "20000", "km", "STORE", "src")
    same(pair, "ZRANGE", "src", "0", "-1", "WITHSCORES")


def test_written_by_one_reads_the_same_in_the_other(kv, reference):
    """Scores copied from Redis into brisk-kv (and back) decode the same."""
    rng = random.Random(9)
    brisk = kv.client()
    args = []
    for i in range(300):
        lon, lat = rand_point(rng)
        args += [lon, lat, f"r{i}"]
    reference.geoadd("fromredis", args)
    args = []
    for i in range(300):
        lon, lat = rand_point(rng)
        args += [lon, lat, f"b{i}"]
    brisk.geoadd("frombrisk", args)
    for src, dst, key in ((reference, brisk, "fromredis"), (brisk, reference, "frombrisk")):
        items = src.zrange(key, 0, -1, withscores=True)
        dst.zadd(key, {m: s for m, s in items})
    for key in ("fromredis", "frombrisk"):
        members = [m.decode() for m in reference.zrange(key, 0, -1)]
        assert brisk.zrange(key, 0, -1, withscores=True) == \
            reference.zrange(key, 0, -1, withscores=True)
        assert brisk.geopos(key, *members) == reference.geopos(key, *members)
        assert brisk.geohash(key, *members) == reference.geohash(key, *members)
        for _ in range(30):
            lon, lat = rand_point(rng)
            q = ["GEOSEARCH", key, "FROMLONLAT", lon, lat, "BYRADIUS", 3000, "km", "WITHDIST",
                 "WITHCOORD", "ASC"]
            assert brisk.execute_command(*q) == reference.execute_command(*q)


ERRORS = [
    ["GEORADIUS", "g", "1", "2", "-1", "km"],
    ["GEORADIUS", "g", "1", "2", "x", "km"],
    ["GEORADIUS", "g", "1", "2", "1", "kmx"],
    ["GEORADIUS", "g", "1", "2", "1", "km", "COUNT"],
    ["GEORADIUS", "g", "1", "2", "1", "km", "COUNT", "0"],
    ["GEORADIUS", "g", "1", "2", "1", "km", "COUNT", "x"],
    ["GEORADIUS", "g", "1", "2", "1", "km", "ANY"],
    ["GEORADIUS", "g", "1", "2", "1", "km", "STORE"],
    ["GEORADIUS", "g", "1", "2", "1", "km", "STORE", "d", "WITHDIST"],
    ["GEORADIUS", "g", "1", "2", "1", "km", "STOREDIST", "d", "WITHCOORD"],
    ["GEORADIUS", "g", "1", "2", "1", "km", "bogus"],
    ["GEORADIUS", "g", "200", "2", "1", "km"],
    ["GEORADIUS_RO", "g", "1", "2", "1", "km", "STORE", "d"],
    ["GEORADIUSBYMEMBER", "g", "nope", "1", "km"],
    ["GEORADIUSBYMEMBER", "g", "a", "1", "km", "STORE", "d", "WITHHASH"],
    ["GEORADIUSBYMEMBER", "nokey", "a", "x", "km", "STORE", "d"],
    ["GEORADIUSBYMEMBER", "nokey", "a", "1", "km", "bogus"],
    ["GEORADIUSBYMEMBER_RO", "g", "a", "1", "km", "STOREDIST", "d"],
    ["GEOSEARCH", "g", "FROMLONLAT", "1", "2", "FROMMEMBER", "a", "BYRADIUS", "1", "km"],
    ["GEOSEARCH", "g", "FROMMEMBER", "a", "FROMLONLAT", "1", "2", "BYRADIUS", "1", "km"],
    ["GEOSEARCH", "g", "BYBOX", "3", "3", "km", "ASC"],
    ["GEOSEARCH", "g", "FROMLONLAT", "1", "2", "ASC", "WITHDIST"],
    ["GEOSEARCH", "g", "FROMLONLAT", "1", "2", "BYRADIUS", "3", "km", "BYBOX", "1", "1", "km"],
    ["GEOSEARCH", "g", "FROMLONLAT", "1", "2", "BYBOX", "3", "4"],
    ["GEOSEARCH", "g", "FROMLONLAT", "1", "2", "BYBOX", "-3", "4", "m"],
    ["GEOSEARCH", "g", "FROMLONLAT", "1", "2", "BYBOX", "a", "4", "m"],
    ["GEOSEARCH", "g", "FROMLONLAT", "1", "2", "BYBOX", "3", "b", "m"],
    ["GEOSEARCH", "g", "FROMLONLAT", "1", "2", "BYBOX", "3", "4", "yd"],
    ["GEOSEARCH", "g", "FROMLONLAT", "1", "2", "BYRADIUS", "3", "km", "STOREDIST"],
    ["GEOSEARCH", "g", "FROMLONLAT", "1", "2", "BYRADIUS", "3", "km", "STORE", "d"],
    ["GEOSEARCH", "g", "FROMMEMBER", "nope", "BYRADIUS", "3", "km"],
    ["GEOSEARCH", "nokey", "FROMMEMBER", "nope", "BYRADIUS", "3", "km"],
    ["GEOSEARCH", "nokey", "FROMMEMBER", "nope", "ASC"],
    ["GEOSEARCHSTORE", "d", "g", "FROMLONLAT", "1", "2", "BYRADIUS", "3", "km", "STORE", "x"],
    ["GEOSEARCHSTORE", "d", "g", "FROMLONLAT", "1", "2", "BYRADIUS", "3", "km", "WITHDIST"],
    ["GEOSEARCHSTORE", "d", "nokey", "FROMLONLAT", "1", "2", "BYRADIUS", "3", "km"],
    ["GEOSEARCH", "g", "frommember", "a", "bybox", "1", "1", "km", "count", "1", "any", "desc"],
    ["GEORADIUS", "g"],
    ["GEOPOS"],
    ["GEODIST", "g", "a"],
    ["GEOHASH"],
]


def test_errors_match_redis(pair):
    both(pair, "GEOADD", "g", "1", "2", "a", "1.5", "2.5", "b")
    both(pair, "SET", "s", "x")
    for cmd in ERRORS:
        same(pair, *cmd)
        same(pair, cmd[0], *["s" if a == "g" else a for a in cmd[1:]])


HOSTILE = [
    ["GEORADIUS", "g", "0", "0", "1e308", "km"],
    ["GEORADIUS", "g", "0", "0", "1e308", "km", "WITHDIST", "COUNT", "3"],
    ["GEORADIUS", "g", "0", "0", "inf", "m", "WITHDIST", "ASC"],
    ["GEORADIUS", "g", "0", "0", "0", "m"],
    ["GEORADIUS", "g", "0", "0", "1e-300", "m"],
    ["GEORADIUS", "g", "0", "0", "1", "km", "COUNT", "-9223372036854775808"],
    ["GEORADIUS", "g", "0", "0", "20000", "km", "COUNT", "9223372036854775807"],
    ["GEORADIUS", "g", "0", "0", "20000", "km", "COUNT", "9223372036854775807", "ANY"],
    ["GEORADIUS", "g", "0", "0", "1", "km", "COUNT", "9223372036854775808"],
    ["GEOSEARCH", "g", "FROMLONLAT", "0", "0", "BYBOX", "1e308", "1e308", "mi", "WITHCOORD"],
    ["GEOSEARCH", "g", "FROMLONLAT", "0", "0", "BYBOX", "inf", "0", "m"],
    ["GEOSEARCH", "g", "FROMLONLAT", "0", "0", "BYBOX", "0", "inf", "m"],
    ["GEOSEARCH", "g", "FROMLONLAT", "180", "85.05112878", "BYRADIUS", "1e308", "ft"],
    ["GEOSEARCH", "g", "FROMLONLAT", "-180", "-85.05112878", "BYBOX", "1", "1", "m"],
    ["GEOSEARCH", "g", "FROMMEMBER", "a", "BYRADIUS", "1e308", "km", "COUNT", "1", "ANY"],
    ["GEOADD", "g", "-180", "-85.05112878", "c", "180", "85.05112878", "d"],
    ["GEORADIUS", "g", "0", "0", "1e308", "km", "WITHHASH", "WITHCOORD"],
]


def test_hostile_inputs(pair, kv):
    rng = random.Random(13)
    fill(pair, rng, "g", 50)
    both(pair, "GEOADD", "g", "1", "2", "a")
    for cmd in HOSTILE:
        same(pair, *cmd)
    assert kv.client().ping()


def test_command_getkeys(pair):
    for cmd in (["GEORADIUS", "k", "1", "2", "3", "m", "STORE", "a", "STOREDIST", "b"],
                ["GEORADIUS", "k", "1", "2", "3", "m", "STOREDIST", "b", "STORE", "a"],
                ["GEORADIUS", "k", "1", "2", "3", "m", "STORE"],
                ["GEORADIUS", "k", "1", "2", "3", "store", "x", "m"],
                ["GEORADIUS", "k", "1", "2", "3", "m", "store", "a", "store", "b"],
                ["GEORADIUSBYMEMBER", "k", "x", "2", "m", "store", "a"],
                ["GEORADIUS_RO", "k", "1", "2", "3", "m", "store", "a"],
                ["GEOSEARCHSTORE", "d", "s", "FROMMEMBER", "x", "BYRADIUS", "1", "m"],
                ["GEOSEARCH", "s", "FROMMEMBER", "x", "BYRADIUS", "1", "m"],
                ["GEOADD", "k", "1", "2", "m"]):
        same(pair, "COMMAND", "GETKEYS", *cmd)


def test_geo_commands_propagate_to_the_aof(kv_factory, tmp_path):
    """GEOADD is written as the ZADD it stands for; a restart reloads it."""
    srv = kv_factory("--appendonly", "yes")
    c = srv.client()
    c.execute_command("GEOADD", "g", "13.361389", "38.115556", "Palermo", "15.087269",
                      "37.502669", "Catania")
    c.execute_command("GEORADIUS", "g", "15", "37", "200", "km", "STOREDIST", "d")
    before = (c.zrange("g", 0, -1, withscores=True), c.zrange("d", 0, -1, withscores=True))
    srv.stop()
    srv.start()
    c = srv.client()
    assert (c.zrange("g", 0, -1, withscores=True), c.zrange("d", 0, -1, withscores=True)) == before
    assert math.isclose(float(c.geodist("g", "Palermo", "Catania", "km")), 166.2742, abs_tol=1e-4)
