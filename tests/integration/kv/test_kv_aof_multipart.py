"""Redis 7.0's multi-part AOF, checked against a real redis-server 7.0.15:
an appendonlydir one server wrote (base RDB or AOF, incr files, after a
BGREWRITEAOF and more writes) loads in the other with the same data; a bad
manifest stops both with the same message; the old single-file layout is
moved into the directory the same way; kill -9 under appendfsync always
loses nothing acknowledged."""
from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from kvlib import KV_BIN, REDIS_SERVER, free_port, start_redis, stop_redis

pytestmark = pytest.mark.skipif(not REDIS_SERVER, reason="redis-server is not installed")


def _fill(c, tag: str):
    c.set(f"s{tag}", "x" * 50)
    c.set(f"n{tag}", 12345)
    c.set(f"ttl{tag}", "v", ex=1000)
    c.rpush(f"l{tag}", *[str(i) for i in range(200)])
    c.sadd(f"set{tag}", *[f"m{i}" for i in range(100)])
    c.sadd(f"iset{tag}", 1, 2, 3)
    c.hset(f"h{tag}", mapping={f"f{i}": str(i) for i in range(80)})
    c.zadd(f"z{tag}", {f"m{i}": i * 1.5 for i in range(150)})
    c.xadd(f"x{tag}", {"a": "1"}, id="1-1")
    c.xadd(f"x{tag}", {"b": "2"}, id="2-1")
    c.execute_command("SELECT", 3)
    c.set(f"db3{tag}", "three")
    c.execute_command("SELECT", 0)
    c.incr(f"n{tag}")


def _snapshot(c) -> dict:
    out = {}
    for db in (0, 3):
        c.execute_command("SELECT", db)
        for k in sorted(c.keys("*")):
            t = c.type(k)
            if t == b"string":
                v = c.get(k)
            elif t == b"list":
                v = c.lrange(k, 0, -1)
            elif t == b"set":
                v = sorted(c.smembers(k))
            elif t == b"hash":
                v = sorted(c.hgetall(k).items())
            elif t == b"zset":
                v = c.zrange(k, 0, -1, withscores=True)
            else:
                v = c.xrange(k)
            out[(db, k)] = (t, v, c.ttl(k) > 0)
    c.execute_command("SELECT", 0)
    return out


def _wait_rewrite(c):
    deadline = time.time() + 20
    while time.time() < deadline:
        p = c.info("persistence")
        if not p["aof_rewrite_in_progress"] and p["aof_rewrites"] >= 1:
            return
        time.sleep(0.05)
    raise AssertionError("rewrite did not finish")


def _write_then_rewrite(c):
    _fill(c, "a")
    c.bgrewriteaof()
    _wait_rewrite(c)
    _fill(c, "b")
    c.delete("sa")
    c.lpop("la")


def _files(d: Path) -> list[str]:
    return sorted(p.name for p in (d / "appendonlydir").iterdir())


@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_redis_writes_brisk_loads(kv_factory, tmp_path, preamble):
    proc, c = start_redis(tmp_path, "--save", "", "--appendonly", "yes", "--appendfsync", "always",
                          "--aof-use-rdb-preamble", preamble, plain=False)
    _write_then_rewrite(c)
    want = _snapshot(c)
    stop_redis(proc, c)
    ext = "rdb" if preamble == "yes" else "aof"
    assert _files(tmp_path) == [f"appendonly.aof.2.base.{ext}", "appendonly.aof.2.incr.aof",
                                "appendonly.aof.manifest"]
    kv = kv_factory("--appendonly", "yes", workdir=tmp_path)
    assert _snapshot(kv.client()) == want
    # and it keeps appending where Redis left off
    kv.client().set("after", "1")
    kv.restart()
    assert kv.client().get("after") == b"1"
    assert _files(tmp_path) == [f"appendonly.aof.2.base.{ext}", "appendonly.aof.2.incr.aof",
                                "appendonly.aof.manifest"]


@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_brisk_writes_redis_loads(kv_factory, tmp_path, preamble):
    kv = kv_factory("--appendonly", "yes", "--appendfsync", "always",
                    "--aof-use-rdb-preamble", preamble)
    c = kv.client()
    _write_then_rewrite(c)
    want = _snapshot(c)
    assert kv.stop() == 0
    ext = "rdb" if preamble == "yes" else "aof"
    assert _files(tmp_path) == [f"appendonly.aof.2.base.{ext}", "appendonly.aof.2.incr.aof",
                                "appendonly.aof.manifest"]
    assert (tmp_path / "appendonlydir" / "appendonly.aof.manifest").read_text() == (
        f"file appendonly.aof.2.base.{ext} seq 2 type b\n"
        "file appendonly.aof.2.incr.aof seq 2 type i\n")
    proc, r = start_redis(tmp_path, "--save", "", "--appendonly", "yes", plain=False)
    try:
        assert _snapshot(r) == want
    finally:
        stop_redis(proc, r)


def test_quoted_file_names_round_trip_with_redis(kv_factory, tmp_path):
    """An appendfilename with a space and a quote is written quoted in the
    manifest, byte for byte as Redis writes it, and each server loads the
    other's; single quotes and \\x escapes in a manifest read as Redis reads
    them."""
    name = 'my "odd" file.aof'
    kv = kv_factory("--appendonly", "yes", "--appendfilename", name, workdir=tmp_path / "kv")
    kv.client().set("k", "brisk")
    assert kv.stop() == 0
    (tmp_path / "ref").mkdir()
    proc, c = start_redis(tmp_path / "ref", "--save", "", "--appendonly", "yes",
                          "--appendfilename", name, plain=False)
    c.set("k", "redis")
    stop_redis(proc, c)
    mine = (tmp_path / "kv" / "appendonlydir" / f"{name}.manifest").read_bytes()
    ref = (tmp_path / "ref" / "appendonlydir" / f"{name}.manifest").read_bytes()
    assert mine == ref and b'"my \\"odd\\" file.aof.1.base.rdb"' in mine
    # each loads the other's directory
    kv = kv_factory("--appendonly", "yes", "--appendfilename", name, workdir=tmp_path / "ref")
    assert kv.client().get("k") == b"redis"
    assert kv.stop() == 0
    proc, c = start_redis(tmp_path / "kv", "--save", "", "--appendonly", "yes",
                          "--appendfilename", name, plain=False)
    try:
        assert c.get("k") == b"brisk"
    finally:
        stop_redis(proc, c)
    # a hand-written manifest with single quotes and a \x escape
    d = tmp_path / "kv" / "appendonlydir"
    base = [f for f in _files(tmp_path / "kv") if ".base." in f][0]
    (d / "b x.rdb").write_bytes((d / base).read_bytes())
    (d / f"{name}.manifest").write_bytes(b"file 'b x.rdb' seq 1 type b\n"
                                         b"file \"i\\x20y.aof\" seq 1 type i\n")
    incr = [f for f in _files(tmp_path / "kv") if ".incr." in f][-1]
    (d / "i y.aof").write_bytes((d / incr).read_bytes() +
                                b"*3\r\n$3\r\nSET\r\n$1\r\nj\r\n$1\r\n1\r\n")
    kv = kv_factory("--appendonly", "yes", "--appendfilename", name, workdir=tmp_path / "kv")
    assert kv.client().mget("k", "j") == [b"brisk", b"1"]


def test_same_files_as_redis_on_start_and_rewrite(kv_factory, tmp_path):
    """The same steps leave the same file names and manifest in both."""
    rdir, kdir = tmp_path / "r", tmp_path / "k"
    rdir.mkdir()
    proc, r = start_redis(rdir, "--save", "", "--appendonly", "yes", plain=False)
    kv = kv_factory("--appendonly", "yes", workdir=kdir)
    c = kv.client()
    for cl in (r, c):
        cl.set("a", "1")
        cl.bgrewriteaof()
        _wait_rewrite(cl)
        cl.config_set("appendonly", "no")
        cl.set("b", "2")
        cl.config_set("appendonly", "yes")
    deadline = time.time() + 10
    while time.time() < deadline and (r.info("persistence")["aof_rewrites"] < 2
                                      or c.info("persistence")["aof_rewrites"] < 2):
        time.sleep(0.05)
    time.sleep(0.3)
    assert _files(kdir) == _files(rdir)
    man = "appendonlydir/appendonly.aof.manifest"
    assert (kdir / man).read_text() == (rdir / man).read_text()
    stop_redis(proc, r)


def _run_fail(cmd: list[str], cwd: Path) -> tuple[int, str]:
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=20)
    return p.returncode, p.stdout + p.stderr


def _start_both(tmp_path: Path, setup, *extra: str) -> tuple[tuple[int, str], tuple[int, str]]:
    out = []
    for name, binary in (("redis", REDIS_SERVER), ("kv", KV_BIN)):
        d = tmp_path / name
        d.mkdir()
        setup(d)
        out.append(_run_fail([binary, "--port", str(free_port()), "--dir", str(d), "--save", "",
                              "--appendonly", "yes", *extra], d))
    return out[0], out[1]


BAD_MANIFESTS = [
    (b"", "Found an empty AOF manifest"),
    (b"file appendonly.aof.1.base.rdb seq 1\n", "Invalid AOF manifest file format"),
    (b"   \n", "Invalid AOF manifest file format"),
    (b"file a/b.rdb seq 1 type b\n", "File can't be a path, just a filename"),
    (b"file a seq 1 type b\nfile b seq 2 type b\n", "Found duplicate base file information"),
    (b"file a seq 2 type i\nfile b seq 1 type i\n", "Found a non-monotonic sequence number"),
    (b"file a seq 1 type x\n", "Unknown AOF file type"),
    (b"file a seq 1 type b", "The AOF manifest file contains too long line"),
    (b"file a seq 0 type b\n", "Invalid AOF manifest file format"),
    (b"file \"unbalanced seq 1 type b\n", "Invalid AOF manifest file format"),
    (b"file 'unbalanced seq 1 type b\n", "Invalid AOF manifest file format"),
    (b"file \"a\"b seq 1 type b\n", "Invalid AOF manifest file format"),
    (b"file 'a'b seq 1 type b\n", "Invalid AOF manifest file format"),
]


@pytest.mark.parametrize("manifest,msg", BAD_MANIFESTS)
def test_bad_manifest_stops_like_redis(tmp_path, manifest, msg):
    def setup(d):
        (d / "appendonlydir").mkdir()
        (d / "appendonlydir" / "appendonly.aof.manifest").write_bytes(manifest)
    (rrc, rout), (krc, kout) = _start_both(tmp_path, setup)
    assert rrc == 1 and msg in rout, rout[-800:]
    assert krc == 1 and msg in kout, kout[-800:]
    assert "FATAL AOF MANIFEST FILE ERROR" in kout
    line = re.search(r"at line \d+", rout)
    if line:
        assert line.group(0) in kout


def test_missing_listed_file_stops_like_redis(tmp_path):
    def setup(d):
        (d / "appendonlydir").mkdir()
        (d / "appendonlydir" / "appendonly.aof.manifest").write_text(
            "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n")
        (d / "appendonlydir" / "appendonly.aof.1.incr.aof").write_bytes(b"")
    (rrc, rout), (krc, kout) = _start_both(tmp_path, setup)
    msg = "Unable to obtain the AOF file appendonly.aof.1.base.rdb length"
    assert rrc == 1 and msg in rout, rout[-800:]
    assert krc == 1 and msg in kout, kout[-800:]


INCR = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n1\r\n"


def _two_incr(d: Path, first: bytes, second: bytes):
    (d / "appendonlydir").mkdir()
    (d / "appendonlydir" / "appendonly.aof.manifest").write_text(
        "file appendonly.aof.1.incr.aof seq 1 type i\nfile appendonly.aof.2.incr.aof seq 2 type i\n")
    (d / "appendonlydir" / "appendonly.aof.1.incr.aof").write_bytes(first)
    (d / "appendonlydir" / "appendonly.aof.2.incr.aof").write_bytes(second)


def test_truncated_incr_not_last_stops_like_redis(tmp_path):
    (rrc, rout), (krc, kout) = _start_both(tmp_path, lambda d: _two_incr(d, INCR[:-3], INCR))
    msg = "Fatal error: the truncated file is not the last file"
    assert rrc == 1 and msg in rout, rout[-800:]
    assert krc == 1 and msg in kout, kout[-800:]


def test_truncated_last_incr_loads(kv_factory, tmp_path):
    _two_incr(tmp_path, INCR, INCR + b"*3\r\n$3\r\nSET\r\n$1\r\nz\r\n$1")
    kv = kv_factory("--appendonly", "yes", workdir=tmp_path)
    assert kv.client().get("k") == b"1" and kv.client().get("z") is None
    assert "AOF appendonly.aof.2.incr.aof loaded anyway because aof-load-truncated is enabled" \
        in kv.output()
    assert (tmp_path / "appendonlydir" / "appendonly.aof.2.incr.aof").read_bytes() == INCR


def test_old_single_file_is_upgraded_like_redis(kv_factory, tmp_path):
    old = INCR + b"*3\r\n$5\r\nRPUSH\r\n$1\r\nl\r\n$1\r\na\r\n"
    rdir, kdir = tmp_path / "r", tmp_path / "k"
    for d in (rdir, kdir):
        d.mkdir()
        (d / "appendonly.aof").write_bytes(old)
    proc, r = start_redis(rdir, "--save", "", "--appendonly", "yes", plain=False)
    kv = kv_factory("--appendonly", "yes", workdir=kdir)
    c = kv.client()
    assert c.get("k") == r.get("k") == b"1" and c.lrange("l", 0, -1) == [b"a"]
    stop_redis(proc, r)
    for d in (rdir, kdir):
        assert not (d / "appendonly.aof").exists()
        assert (d / "appendonlydir" / "appendonly.aof").read_bytes() == old
    assert _files(kdir) == _files(rdir)
    man = "appendonlydir/appendonly.aof.manifest"
    assert (kdir / man).read_text() == (rdir / man).read_text()


def test_kill9_under_fsync_always_loses_nothing(kv_factory, tmp_path):
    kv = kv_factory("--appendonly", "yes", "--appendfsync", "always")
    c = kv.client()
    for i in range(300):
        c.set(f"k{i}", i)
        if i == 150:
            c.bgrewriteaof()
    kv.kill9()
    kv.start()
    c = kv.client()
    assert [c.get(f"k{i}") for i in range(300)] == [str(i).encode() for i in range(300)]


def test_appenddirname_is_startup_only_and_not_a_path(kv_factory, tmp_path, reference):
    kv = kv_factory("--appendonly", "yes", "--appenddirname", "mydir")
    c = kv.client()
    c.set("a", "1")
    assert (tmp_path / "mydir" / "appendonly.aof.manifest").exists()
    assert c.config_get("appenddirname") == {"appenddirname": "mydir"}
    assert c.config_get("aof-use-rdb-preamble") == {"aof-use-rdb-preamble": "yes"}
    ref = reference.config_get("aof-use-rdb-preamble")
    assert {str(k, "ascii") if isinstance(k, bytes) else k: v if isinstance(v, str) else v.decode()
            for k, v in ref.items()} == {"aof-use-rdb-preamble": "yes"}
    errs = []
    for cl in (c, reference):
        with pytest.raises(Exception) as e:
            cl.config_set("appenddirname", "x")
        errs.append(str(e.value))
    assert errs[0] == errs[1]
    rc, out = _run_fail([KV_BIN, "--port", str(free_port()), "--appenddirname", "a/b"], tmp_path)
    rrc, rout = _run_fail([REDIS_SERVER, "--port", str(free_port()), "--appenddirname", "a/b"],
                          tmp_path)
    assert rc != 0 and rrc != 0
    assert "appenddirname can't be a path, just a dirname" in out
    assert "appenddirname can't be a path, just a dirname" in rout


def test_timestamp_annotations_load_like_redis(kv_factory, tmp_path):
    """Redis 7 with aof-timestamp-enabled writes "#TS:..." lines between
    commands; both servers skip them (one cut off at the end too)."""
    body = (b"#TS:1628217470\r\n" + INCR + b"#TS:1628217471\r\n"
            + b"*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n2\r\n#TS:16282")
    got = []
    for name in ("r", "k"):
        d = tmp_path / name
        d.mkdir()
        (d / "appendonlydir").mkdir()
        (d / "appendonlydir" / "appendonly.aof.manifest").write_text(
            "file appendonly.aof.1.incr.aof seq 1 type i\n")
        (d / "appendonlydir" / "appendonly.aof.1.incr.aof").write_bytes(body)
        if name == "r":
            proc, c = start_redis(d, "--save", "", "--appendonly", "yes", plain=False)
            got.append(c.mget("k", "b"))
            stop_redis(proc, c)
        else:
            got.append(kv_factory("--appendonly", "yes", workdir=d).client().mget("k", "b"))
    assert got[0] == got[1] == [b"1", b"2"]


def _check(binary: list[str], *args: str, cwd: Path) -> tuple[int, list[str]]:
    p = subprocess.run([*binary, *args], cwd=cwd, capture_output=True, text=True, timeout=20,
                       input="y\n")  # redis-check-aof --fix asks
    keep = ("Start", "AOF analyzed", "is valid", "not valid", "All AOF", "Failed to truncate",
            "Successfully truncated", "aborting", "Truncate nothing")
    # (brisk-kv --fix does not ask "Continue? [y/N]": it is meant for scripts)
    lines = [ln.replace("Continue? [y/N]: ", "") for ln in p.stdout.splitlines()]
    return p.returncode, [ln.split(" to ")[0] if "Successfully truncated" in ln else ln
                          for ln in lines if any(k in ln for k in keep)]


CHECK_CASES = {
    "valid": (INCR, INCR, []),
    "short incr": (INCR, INCR + b"*3\r\n$3\r\nSET\r\n$1\r\nb\r\n!!!", []),
    "bad base": (INCR + b"*1\r\n$5\r\nMULTI\r\n" + INCR[23:], INCR, []),
    "fix incr": (INCR, INCR + b"*3\r\n$3\r\nSET\r\n$1\r\nb\r\n!!!", ["--fix"]),
    "fix base": (INCR + b"*1\r\n$5\r\nMULTI\r\n" + INCR[23:], INCR, ["--fix"]),
    "ts cut": (INCR, b"#TS:100\r\n" + INCR + b"#TS:200\r\n" + INCR,
               ["--truncate-to-timestamp", "150"]),
    "ts nothing before": (INCR, b"#TS:100\r\n" + INCR, ["--truncate-to-timestamp", "50"]),
    "ts in base": (b"#TS:100\r\n" + INCR + b"#TS:200\r\n" + INCR, INCR,
                   ["--truncate-to-timestamp", "150"]),
}


@pytest.mark.parametrize("case", sorted(CHECK_CASES))
def test_check_aof_on_a_manifest_like_redis_check_aof(tmp_path, case):
    base, incr, opts = CHECK_CASES[case]
    out = []
    for name, binary in (("r", ["redis-check-aof"]), ("k", [KV_BIN, "--check-aof"])):
        d = tmp_path / name / "appendonlydir"
        d.mkdir(parents=True)
        (d / "appendonly.aof.manifest").write_text(
            "file appendonly.aof.1.base.aof seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n")
        (d / "appendonly.aof.1.base.aof").write_bytes(base)
        (d / "appendonly.aof.1.incr.aof").write_bytes(incr)
        rc, lines = _check(binary, *opts, "appendonly.aof.manifest", cwd=d)
        out.append((rc, lines, (d / "appendonly.aof.1.incr.aof").read_bytes(),
                    (d / "appendonly.aof.1.base.aof").read_bytes()))
    assert out[0] == out[1]


def test_rewrite_with_aof_off_continues_the_manifest_like_redis(kv_factory, tmp_path):
    """appendonly no still reads the manifest at start: BGREWRITEAOF makes
    base 3 and drops the old files, as Redis 7."""
    def setup(d):
        (d / "appendonlydir").mkdir(parents=True)
        (d / "appendonlydir" / "appendonly.aof.manifest").write_text(
            "file appendonly.aof.2.base.aof seq 2 type b\nfile appendonly.aof.2.incr.aof seq 2 type i\n")
        (d / "appendonlydir" / "appendonly.aof.2.base.aof").write_bytes(INCR)
        (d / "appendonlydir" / "appendonly.aof.2.incr.aof").write_bytes(INCR)
    rdir, kdir = tmp_path / "r", tmp_path / "k"
    setup(rdir)
    setup(kdir)
    proc, r = start_redis(rdir, "--save", "", "--appendonly", "no", plain=False)
    kv = kv_factory("--appendonly", "no", workdir=kdir)
    for c in (r, kv.client()):
        c.set("x", "1")
        c.bgrewriteaof()
        _wait_rewrite(c)
    stop_redis(proc, r)
    assert _files(kdir) == _files(rdir)
    man = "appendonlydir/appendonly.aof.manifest"
    assert (kdir / man).read_text() == (rdir / man).read_text()
