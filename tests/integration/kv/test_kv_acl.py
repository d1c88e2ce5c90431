"""ACLs: users, rules, ACL LIST / GETUSER / LOG / DRYRUN, NOPERM errors, AUTH
with user names, aclfile SAVE / LOAD, requirepass. Every reply is compared
with a real redis-server 7's for the same commands (errors included, by
their text); a few checks (client kills, hostile arguments) look at
brisk-kv alone.

Redis prints the single-command part of a rule description in its command
dictionary's order, which changes from one process to the next, so the
rule sets below leave at most one single command to describe.
"""
from __future__ import annotations

import subprocess
import time

import pytest
import redis

from kvlib import KV_BIN, free_port, raw, start_redis, stop_redis



def reply(client, *args):
    """The reply, or the error text, as comparable text."""
    try:
        return norm(client.execute_command(*args))
    except (redis.ResponseError, redis.AuthenticationError) as e:
        return ("error", str(e))


def norm(v):
    if isinstance(v, Exception):
        return ("error", str(v))
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, (list, tuple)):
        return [norm(x) for x in v]
    if isinstance(v, dict):
        return {norm(k): norm(x) for k, x in v.items()}
    if isinstance(v, set):
        return sorted(norm(x) for x in v)
    return v


def both(r, reference, *args):
    a, b = reply(r, *args), reply(reference, *args)
    assert a == b, (args, a, b)
    return a


def user_line(client, name):
    for line in norm(client.execute_command("ACL", "LIST")):
        if line.split(" ")[1] == name:
            return line
    return None


RULE_SETS = [
    [],
    ["on", ">pw1", ">pw2", "<pw1"],
    ["on", "nopass", "~*", "&*", "+@all"],
    ["on", "resetpass", "allkeys", "allchannels", "allcommands"],
    ["#" + "a" * 64, "#" + "0123456789abcdef" * 4, "!" + "a" * 64],
    ["~foo*", "%R~bar", "%W~baz", "%RW~qux", "%R~baz", "&ch*", "&news"],
    ["+get"],
    ["-@all", "+@hash"],
    ["+@all", "-@hash"],
    ["+@hash", "-hdel"],
    ["-@all", "+@list"],
    ["+@all", "-@list"],
    ["+config|get"],
    ["+config", "-config|set"],
    ["+select|0", "+select|1"],
    ["+@all", "-select", "+select|0"],
    ["on", "(~x +get)", "(%R~r* +@hash &c)"],
    ["(~x +get)", "clearselectors"],
    ["on", ">x", "~a", "+get", "reset"],
    ["sanitize-payload"],
    ["skip-sanitize-payload"],
    ["allkeys", "resetkeys", "~k1", "~k1"],
    ["allchannels", "resetchannels", "&a", "&a"],
    ["nocommands"],
    ["on", ">a\x00b", "<a\x00c"],
    ["on", ">a\x00b", "<a\x00b", "\x00"],
]


@pytest.mark.parametrize("rules", RULE_SETS, ids=lambda r: " ".join(r) or "empty")
def test_setuser_list_getuser_like_redis(r, reference, rules):
    both(r, reference, "ACL", "SETUSER", "u1", *rules)
    assert user_line(r, "u1") == user_line(reference, "u1")
    both(r, reference, "ACL", "GETUSER", "u1")
    both(r, reference, "ACL", "USERS")


def test_default_user_and_whoami(r, reference):
    both(r, reference, "ACL", "LIST")
    both(r, reference, "ACL", "GETUSER", "default")
    both(r, reference, "ACL", "WHOAMI")
    both(r, reference, "ACL", "GETUSER", "nosuchuser")
    both(r, reference, "ACL", "CAT")
    both(r, reference, "ACL", "HELP")


BAD_RULES = [
    ["foo"],
    ["+@foo"],
    ["+nosuchcommand"],
    ["-select|0"],
    ["+get|"],
    ["+get|x|y"],
    ["+config|get|x"],
    ["+config|nosuch"],
    ["~*", "~x"],
    ["&*", "&x"],
    ["<nopw"],
    ["#abc"],
    ["#" + "A" * 64],
    ["!" + "g" * 64],
    ["%~foo"],
    ["%X~foo"],
    ["(foo)"],
    ["(+get"],
    ["(+get", "~x"],
    ["(~* ~x)"],
    ["~a b"],
]


@pytest.mark.parametrize("rules", BAD_RULES, ids=lambda r: " ".join(r))
def test_setuser_errors_like_redis(r, reference, rules):
    both(r, reference, "ACL", "SETUSER", "bad", *rules)
    # nothing was applied
    both(r, reference, "ACL", "GETUSER", "bad")


def test_acl_subcommand_errors_like_redis(r, reference):
    for args in [
        ("ACL",), ("ACL", "GETUSER"), ("ACL", "FOO"), ("ACL", "LIST", "x"),
        ("ACL", "CAT", "foo"), ("ACL", "CAT", "a", "b"), ("ACL", "HELP", "x"),
        ("ACL", "SETUSER", "a a"), ("ACL", "SETUSER", "a\x00b"),
        ("ACL", "DELUSER", "default"), ("ACL", "DELUSER", "nobody", "default"),
        ("ACL", "DELUSER", "nobody"), ("ACL", "GENPASS", "0"), ("ACL", "GENPASS", "4097"),
        ("ACL", "GENPASS", "-9223372036854775808"), ("ACL", "GENPASS", "9223372036854775807"),
        ("ACL", "GENPASS", "abc"), ("ACL", "LOG", "abc"), ("ACL", "LOG", "-9223372036854775808"),
        ("ACL", "LOG", "99999999999999999999"), ("ACL", "SAVE"), ("ACL", "LOAD"),
        ("ACL", "DRYRUN", "nobody", "get", "x"), ("ACL", "DRYRUN", "default", "nosuch"),
        ("ACL", "DRYRUN", "default", "get"), ("ACL", "DRYRUN", "default", "get", "x"),
        ("ACL", "DRYRUN", "default", "config", "foo"), ("ACL", "DRYRUN", "default", "config"),
        ("ACL", "DRYRUN", "default", "config", "get"), ("ACL", "DRYRUN", "default", "client", "id", "x"),
        ("AUTH", "x"), ("AUTH", "a", "b", "c"), ("AUTH", "nobody", "x"),
    ]:
        both(r, reference, *args)
    assert len(r.execute_command("ACL", "GENPASS")) == 64
    assert len(r.execute_command("ACL", "GENPASS", "5")) == 2
    assert len(r.execute_command("ACL", "GENPASS", "4096")) == 1024
    assert r.ping()


def clients_for(port, ref_port, user, password):
    a = redis.Redis(port=port, username=user, password=password, decode_responses=True)
    b = redis.Redis(port=ref_port, username=user, password=password, decode_responses=True)
    return a, b


def same(a, b, *args):
    def one(c):
        try:
            return norm(c.execute_command(*args))
        except (redis.ResponseError, redis.AuthenticationError) as e:
            return ("error", str(e))
    x, y = one(a), one(b)
    assert x == y, (args, x, y)
    return x


def ref_port(reference):
    return reference.connection_pool.connection_kwargs["port"]


def test_noperm_errors_like_redis(kv, r, reference):
    rules = ["on", ">pw", "+get", "+set", "+lpush", "+publish", "+subscribe", "+incr",
             "+config|get", "+select|0", "+copy", "+multi", "+exec", "%R~r*", "%W~w*", "~k*",
             "&news*"]
    both(r, reference, "ACL", "SETUSER", "lu", *rules)
    a, b = clients_for(kv.port, ref_port(reference), "lu", "pw")
    for args in [
        ("SET", "k1", "v"), ("GET", "k1"), ("GET", "r1"), ("SET", "r1", "v"),
        ("SET", "w1", "v"), ("GET", "w1"), ("SET", "w1", "v", "GET"), ("LPUSH", "w2", "x"),
        ("INCR", "w3"), ("INCR", "k3"), ("DEL", "k1"), ("PUBLISH", "news.1", "m"),
        ("PUBLISH", "other", "m"), ("CONFIG", "GET", "maxmemory"), ("CONFIG", "SET", "x", "y"),
        ("SELECT", "0"), ("SELECT", "1"), ("COPY", "r1", "w9"), ("COPY", "w1", "r9"),
        ("ACL", "WHOAMI"), ("PING",), ("CONFIG", "GET"), ("CONFIG", "SET", "a"),
    ]:
        same(a, b, *args)
    # in MULTI the refusal flags the transaction
    for c in (a, b):
        c.execute_command("MULTI")
    same(a, b, "DEL", "k1")
    same(a, b, "EXEC")
    for args in [("ACL", "DRYRUN", "lu", "SET", "w1", "v", "GET"),
                 ("ACL", "DRYRUN", "lu", "PUBLISH", "other", "x"),
                 ("ACL", "DRYRUN", "lu", "SUBSCRIBE", "news.x", "nope"),
                 ("ACL", "DRYRUN", "lu", "CONFIG", "SET", "a", "b"),
                 ("ACL", "DRYRUN", "lu", "SELECT", "0"),
                 ("ACL", "DRYRUN", "lu", "GET", "k1")]:
        both(r, reference, *args)
    a.close(), b.close()


def test_exec_rechecks_changed_rules_like_redis(kv, r, reference):
    both(r, reference, "ACL", "SETUSER", "tx", "on", ">p", "+multi", "+exec", "+incr", "~*")
    a, b = clients_for(kv.port, ref_port(reference), "tx", "p")
    for c in (a, b):
        c.execute_command("MULTI")
    same(a, b, "INCR", "n")
    both(r, reference, "ACL", "SETUSER", "tx", "-incr")
    same(a, b, "EXEC")
    log_a = norm(r.execute_command("ACL", "LOG", "1"))
    log_b = norm(reference.execute_command("ACL", "LOG", "1"))
    for la, lb in zip(log_a, log_b):
        la, lb = dict(zip(la[::2], la[1::2])), dict(zip(lb[::2], lb[1::2]))
        for k in ("count", "reason", "context", "object", "username"):
            assert la[k] == lb[k], k
    a.close(), b.close()


def test_auth_with_user_names(kv, r, reference):
    both(r, reference, "ACL", "SETUSER", "alice", "on", ">secret", "+@all", "~*")
    a, b = clients_for(kv.port, ref_port(reference), "alice", "secret")
    assert a.ping() and b.ping()
    same(a, b, "ACL", "WHOAMI")
    for port in (kv.port, ref_port(reference)):
        bad = redis.Redis(port=port, username="alice", password="nope")
        with pytest.raises(redis.AuthenticationError) as e:
            bad.ping()
        assert "invalid username-password pair" in str(e.value)
    both(r, reference, "ACL", "SETUSER", "bin", "on", ">p\x00q", "+@all")
    for port in (kv.port, ref_port(reference)):
        assert redis.Redis(port=port, username="bin", password="p\x00q").ping()
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=port, username="bin", password="p").ping()
    both(r, reference, "ACL", "SETUSER", "alice", "off")
    for port in (kv.port, ref_port(reference)):
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=port, username="alice", password="secret").ping()
    # HELLO 3 AUTH
    both(r, reference, "ACL", "SETUSER", "alice", "on")
    x = reply(r, "HELLO", "3", "AUTH", "alice", "wrong")
    y = reply(reference, "HELLO", "3", "AUTH", "alice", "wrong")
    assert x == y
    ok = r.execute_command("HELLO", "2", "AUTH", "alice", "secret")
    assert ok
    assert r.execute_command("ACL", "WHOAMI") == "alice"
    assert r.execute_command("RESET") == "RESET"
    assert r.execute_command("ACL", "WHOAMI") == "default"
    a.close(), b.close()


def test_acl_log_like_redis(kv, r, reference):
    both(r, reference, "ACL", "SETUSER", "lg", "on", ">p", "+get", "~a*")
    a, b = clients_for(kv.port, ref_port(reference), "lg", "p")
    for _ in range(3):
        same(a, b, "GET", "zz")
    same(a, b, "SET", "a1", "v")
    for c in (r, reference):
        with pytest.raises(redis.AuthenticationError):
            c.execute_command("AUTH", "lg", "bad")
    # redis-py's CLIENT SETINFO on connect is a command Redis 7.0 does not
    # know (no ACL check, no entry) while brisk-kv knows and refuses it
    skip = lambda log: [e for e in log if not e[7].startswith("client")]
    la = skip(norm(r.execute_command("ACL", "LOG")))
    lb = skip(norm(reference.execute_command("ACL", "LOG")))
    assert len(la) == len(lb) == 3
    for ea, eb in zip(la, lb):
        da, db = dict(zip(ea[::2], ea[1::2])), dict(zip(eb[::2], eb[1::2]))
        assert list(da) == list(db)
        for k in ("count", "reason", "context", "object", "username"):
            assert da[k] == db[k], k
        assert "user=" in da["client-info"]
    assert len(norm(r.execute_command("ACL", "LOG", "2"))) == 2
    both(r, reference, "ACL", "LOG", "RESET")
    both(r, reference, "ACL", "LOG")
    a.close(), b.close()


def test_acllog_max_len(r):
    r.config_set("acllog-max-len", 2)
    assert r.config_get("acllog-max-len") == {"acllog-max-len": "2"}
    for i in range(5):
        with pytest.raises(redis.AuthenticationError):
            r.execute_command("AUTH", f"nobody{i}", "x")
    assert len(r.execute_command("ACL", "LOG")) == 2


def test_deluser_closes_its_clients(kv, r):
    r.execute_command("ACL", "SETUSER", "gone", "on", ">p", "+@all", "~*")
    other = redis.Redis(port=kv.port, username="gone", password="p", decode_responses=True)
    assert other.ping()
    me = redis.Redis(port=kv.port, username="gone", password="p", decode_responses=True,
                     retry_on_timeout=False)
    me.ping()
    conn = me.connection_pool.get_connection("x")
    conn.send_command("ACL", "DELUSER", "gone")
    assert conn.read_response() == 1  # the reply arrives, then the connection closes
    with pytest.raises(redis.ConnectionError):
        conn.send_command("PING")
        conn.read_response()
    with pytest.raises((redis.ConnectionError, redis.AuthenticationError)):
        other.connection_pool.reset()
        other.ping()
    assert r.ping()


def test_subscribers_lose_revoked_channels(kv, r):
    r.execute_command("ACL", "SETUSER", "ps", "on", ">p", "+@all", "resetchannels", "&a*", "&b")
    sub = redis.Redis(port=kv.port, username="ps", password="p").pubsub()
    sub.subscribe("a1")
    assert sub.get_message(timeout=5)["type"] == "subscribe"
    until(lambda: any(c["user"] == "ps" for c in r.client_list()))
    r.execute_command("ACL", "SETUSER", "ps", "&c")  # a superset: kept
    assert any(c["user"] == "ps" for c in r.client_list())
    r.execute_command("ACL", "SETUSER", "ps", "resetchannels", "&b")
    until(lambda: not any(c["user"] == "ps" for c in r.client_list()))
    sub.close()


def until(cond, timeout=5.0):
    deadline = time.time() + timeout
    while not cond():
        assert time.time() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_requirepass_is_the_default_users_password(kv, r, reference):
    for c in (r, reference):
        c.config_set("requirepass", "pw")
    both(r, reference, "ACL", "GETUSER", "default")
    both(r, reference, "ACL", "LIST")
    for port in (kv.port, ref_port(reference)):
        c = redis.Redis(port=port)
        with pytest.raises(redis.AuthenticationError):
            c.ping()
        assert redis.Redis(port=port, password="pw").ping()
    # raw: redis-py's CLIENT SETINFO on connect would meet NOAUTH first
    assert raw(kv.port, b"AUTH bad\r\nGET x\r\n") == raw(ref_port(reference),
                                                        b"AUTH bad\r\nGET x\r\n")
    for c in (r, reference):
        c.config_set("requirepass", "")
    both(r, reference, "ACL", "GETUSER", "default")
    assert redis.Redis(port=kv.port).ping()


def test_default_user_off_refuses_new_connections(kv, r):
    r.execute_command("ACL", "SETUSER", "default", "off")
    assert raw(kv.port, b"GET x\r\n").startswith(b"-NOAUTH")
    r.execute_command("ACL", "SETUSER", "default", "on")
    assert raw(kv.port, b"GET x\r\n") == b"$-1\r\n"


def test_aclfile_save_and_load_like_redis(kv_factory, tmp_path):
    kdir, rdir = tmp_path / "kv", tmp_path / "redis"
    kdir.mkdir(), rdir.mkdir()
    start = "user default on nopass ~* &* +@all\nuser bob on #" + "b" * 64 + " ~b* -@all +get\n"
    (kdir / "users.acl").write_text(start)
    (rdir / "users.acl").write_text(start)
    kv = kv_factory("--aclfile", str(kdir / "users.acl"))
    r = kv.client(decode_responses=True)
    proc, ref = start_redis(rdir, "--aclfile", str(rdir / "users.acl"), decode_responses=True)
    try:
        assert norm(r.execute_command("ACL", "LIST")) == ref.execute_command("ACL", "LIST")
        for c in (r, ref):
            c.execute_command("ACL", "SETUSER", "carol", "on", ">pw", "%R~c*", "&x", "+@hash",
                              "(~s* +get)")
            c.execute_command("ACL", "SAVE")
        assert (kdir / "users.acl").read_text() == (rdir / "users.acl").read_text()
        # a bad file changes nothing and says why
        bad = "user dave on +nosuch\nuser bob on\nuser bob off\nnotauser\n"
        (kdir / "users.acl").write_text(bad)
        (rdir / "users.acl").write_text(bad)
        x = reply(r, "ACL", "LOAD")
        y = reply(ref, "ACL", "LOAD")
        norm_path = lambda t: (t[0], t[1].replace(str(kdir), "D").replace(str(rdir), "D"))
        assert norm_path(x) == norm_path(y)
        assert norm(r.execute_command("ACL", "LIST")) == ref.execute_command("ACL", "LIST")
        # a good one replaces the users
        good = "user erin on nopass ~* +@all\n\nuser default on nopass ~* &* +@all -flushall\n"
        (kdir / "users.acl").write_text(good)
        (rdir / "users.acl").write_text(good)
        assert r.execute_command("ACL", "LOAD") == ref.execute_command("ACL", "LOAD") == "OK"
        assert norm(r.execute_command("ACL", "LIST")) == ref.execute_command("ACL", "LIST")
    finally:
        stop_redis(proc, ref)


def test_aclfile_long_lines(kv_factory, tmp_path):
    rules = " ".join(f"~k{i}" for i in range(3000))
    (tmp_path / "u.acl").write_text(f"user default on nopass ~* &* +@all\nuser many on {rules}\n")
    kv = kv_factory("--aclfile", str(tmp_path / "u.acl"))
    r = kv.client(decode_responses=True)
    keys = r.execute_command("ACL", "GETUSER", "many")[7]
    assert keys.split(" ")[-1] == "~k2999" and len(keys.split(" ")) == 3000
    (tmp_path / "u.acl").write_text("user default on nopass ~* &* +@all\x00\n")
    # Redis reads a command rule as a C string: "+@all\0" is +@all (7.0.15 loads it).
    assert str(reply(r, "ACL", "LOAD")) == "OK"


def test_user_lines_in_config(kv_factory, tmp_path):
    conf = tmp_path / "kv.conf"
    port = free_port()
    conf.write_text(f'port {port}\ndir {tmp_path}\n'
                    'user default on nopass ~* &* +@all -flushdb\n'
                    'user ann on >pw ~a* "(+get ~g*)"\n')
    proc = subprocess.Popen([KV_BIN, str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    r = redis.Redis(port=port, decode_responses=True)
    for _ in range(200):
        try:
            r.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    try:
        check_config_users(r, port)
    finally:
        proc.terminate()
        assert proc.wait(10) == 0


def check_config_users(r, port):
    with pytest.raises(redis.ResponseError) as e:
        r.flushdb()
    assert str(e.value) == "this user has no permissions to run the 'flushdb' command"
    assert r.execute_command("ACL", "USERS") == ["ann", "default"]
    ann = redis.Redis(port=port, username="ann", password="pw", decode_responses=True)
    assert ann.get("g1") is None


def test_duplicate_user_lines_refuse_to_start(kv_factory):
    kv = kv_factory("--user", "foo", "--user", "foo", start=False)
    kv.expect_exit = True
    kv.start(wait=False)
    assert kv.proc.wait(10) != 0
    assert "Duplicate user" in kv.output()


def test_hostile_rules_leave_server_alive(kv, r):
    many = [f"~k{i}" for i in range(5000)] + [f"&c{i}" for i in range(2000)]
    assert r.execute_command("ACL", "SETUSER", "big", "on", "nopass", "+@all", *many) == "OK"
    big = redis.Redis(port=kv.port, username="big", password="x")
    assert big.set("k1", "v")
    with pytest.raises(redis.ResponseError):
        big.set("nope", "v")
    many_keys = [f"k{i}" for i in range(300)]
    assert big.delete(*many_keys) == 1
    with pytest.raises(redis.ResponseError):
        r.execute_command("ACL", "SETUSER", "big", ">" + "x" * 100000, "+nosuch")
    assert r.execute_command("ACL", "SETUSER", "huge", ">" + "x" * 1000000) == "OK"
    assert len(r.execute_command("ACL", "GETUSER", "huge")[3][0]) == 64
    for i in range(200):
        r.execute_command("ACL", "SETUSER", f"u{i}", "(~a +get)", "(~b +set)")
    assert r.execute_command("ACL", "DELUSER", *[f"u{i}" for i in range(200)]) == 200
    assert r.ping()


def test_resp3_replies_byte_for_byte(kv, r, reference):
    both(r, reference, "ACL", "SETUSER", "r3", "on", ">p", "~a", "(~b +get)", "&c")
    req = (b"HELLO 3\r\nACL GETUSER r3\r\nACL GETUSER default\r\nACL GETUSER nobody\r\n"
           b"ACL CAT\r\nACL USERS\r\nAUTH r3 bad\r\nACL WHOAMI\r\n")
    a = raw(kv.port, req)
    b = raw(ref_port(reference), req)
    # the HELLO maps differ (server version); everything after them is equal
    assert a[a.index(b"%6\r\n$5\r\nflags"):] == b[b.index(b"%6\r\n$5\r\nflags"):]
