"""Lua scripting and functions, side by side with a real redis-server 7."""
import socket
import threading
import time

import pytest
import redis


def both(r, reference, *cmd):
    """Runs cmd on brisk-kv (r) and on the reference; returns both results
    (exception text for errors), brisk-kv's decoded to bytes."""
    out = []
    for cli in (r, reference):
        try:
            v = cli.execute_command(*cmd)
        except redis.ResponseError as e:
            v = ("error", str(e))
        out.append(v)
    return out


def enc(v):
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, list):
        return [enc(x) for x in v]
    if isinstance(v, tuple):
        return v
    return v


SCRIPTS = [
    "return 'hello'",
    "return 100.5",
    "return true",
    "return false",
    "return nil",
    "return {ok='fine'}",
    "return {err='ERR this is an error'}",
    "return {err='bar'}",
    "return redis.error_reply('bar')",
    "return redis.error_reply('MY bar')",
    "return redis.status_reply('X')",
    "return {1,2,3,'ciao',{1,2}}",
    "return {1,2,nil,4}",
    "return {KEYS[1], ARGV[1]}",
    "return a",
    "a = 1",
    "error('boom')",
    "error({err='MY x'})",
    "return redis.call('nosuch')",
    "return redis.call('get')",
    "return redis.call()",
    "return redis.call({})",
    "return redis.call('eval', 'return 1', 0)",
    "redis.call = 1",
    "rawset(_G, 'zz', 1)",
    "string.upper = nil",
    "setmetatable(_G, {})",
    "return ('abc'):upper()",
    "return loadstring(string.dump(function() return 1 end))",
    "return redis.call('incr', KEYS[1])",
    "return redis.pcall('hget', KEYS[1], 'x')",
    "return redis.sha1hex('')",
    "return redis.sha1hex('abc')",
    "return tostring(math.random())",
    "return cjson.encode({1, 2, 'x'})",
    "return cjson.decode('[1,2,3]')",
    "return struct.unpack('>I2', struct.pack('>I2', 258))",
    "return bit.band(7, 3)",
    "local e = cmsgpack.pack(0.1) local h = '' for i = 1, #e do h = h .. string.format('%02x', string.byte(e, i)) end return h",
    "return cmsgpack.unpack(cmsgpack.pack({1, 2, 'a', {3}}))",
    "return redis.setresp(4)",
    "return redis.REDIS_VERSION ~= nil",
    "return print",
    "return os",
    "return syntax error",
    "#!lua flags=no-writes\nreturn redis.call('set','x','1')",
    "#!lua flags=bad\nreturn 1",
    "#!luax\nreturn 1",
    "#!lua name=x\nreturn 1",
    "#!lua\nreturn redis.call('set', KEYS[1], 'v')",
    "local ok, e = pcall(redis.call, 'hget', KEYS[1], 'f') return e",
    "local ok, e = pcall(redis.call, 'nosuch') return {tostring(ok), e}",
    "local ok, e = pcall(error, {err=5}) return type(e)",
    "error(nil)",
    "error({err=1})",
    "return redis.sha1hex()",
    "return redis.status_reply()",
    "return redis.error_reply()",
    "return redis.log(99, 'x')",
    "return redis.set_repl()",
    "return redis.setresp()",
    "return redis.pcall()",
    "return 2^63",
    "return {1, nil, 3}",
    "return cjson.encode(cjson.decode('[1,2.5,\"x\",null,true]'))",
    "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2, 0)}",
    "return getfenv",
]


@pytest.mark.parametrize("script", SCRIPTS)
def test_eval_matches_redis(r, reference, script):
    mine, ref = both(r, reference, "EVAL", script, 1, "k1", "a1")
    assert enc(mine) == ref


def test_eval_ro_refuses_writes(r, reference):
    for body in ("return redis.call('set','x','1')", "#!lua\nreturn 1",
                 "#!lua flags=no-writes\nreturn redis.call('get','x')",
                 "#!lua flags=no-writes\nreturn redis.call('set','x','1')"):
        mine, ref = both(r, reference, "EVAL_RO", body, 0)
        assert enc(mine) == ref, body


@pytest.mark.parametrize("cmd", [
    ("SCRIPT", "EXISTS"), ("SCRIPT", "LOAD"), ("SCRIPT", "FOO"), ("SCRIPT", "FLUSH", "SYNC", "X"),
    ("FUNCTION", "FOO"), ("FUNCTION", "STATS", "x"), ("FUNCTION", "DUMP", "x"),
    ("FUNCTION", "FLUSH", "a", "b"), ("FUNCTION", "RESTORE", "a", "b", "c"),
    ("FUNCTION", "LIST", "LIBRARYNAME"), ("FUNCTION", "LIST", "WITHCODE", "WITHCODE"),
    ("FCALL", "nosuch", "x"), ("EVALSHA", "0" * 40, "x")])
def test_subcommand_errors(r, reference, cmd):
    mine, ref = both(r, reference, *cmd)
    assert enc(mine) == ref


def test_numkeys_errors(r, reference):
    for nk in ("-1", "3", "x"):
        mine, ref = both(r, reference, "EVAL", "return 1", nk, "a")
        assert enc(mine) == ref


def test_evalsha_and_script(r, reference):
    for cli in (r, reference):
        cli.execute_command("SCRIPT", "FLUSH")
    body = "return redis.call('get', KEYS[1])"
    mine, ref = both(r, reference, "SCRIPT", "LOAD", body)
    assert enc(mine) == ref
    sha = ref.decode()
    for cmd in (("SCRIPT", "EXISTS", sha, "f" * 40), ("EVALSHA", sha.upper(), 1, "nokey"),
                ("EVALSHA", "f" * 40, 0), ("EVALSHA", "short", 0), ("SCRIPT", "KILL"),
                ("SCRIPT", "FLUSH", "bad")):
        mine, ref = both(r, reference, *cmd)
        assert enc(mine) == ref, cmd


def test_resp3_conversions(kv, reference):
    mine = kv.client(protocol=3)
    ref = redis.Redis(port=reference.connection_pool.connection_kwargs["port"], protocol=3)
    for cli in (mine, ref):
        cli.execute_command("DEL", "h", "z")
        cli.execute_command("HSET", "h", "f", "v")
        cli.execute_command("ZADD", "z", "1.5", "m")
    scripts = ("redis.setresp(3) return redis.call('hgetall', 'nohash')",
               "redis.setresp(3) return redis.call('hgetall', 'h')",
               "redis.setresp(3) local t = redis.call('hgetall', 'h') return t['map']['f']",
               "redis.setresp(3) return redis.call('zscore', 'z', 'm')",
               "redis.setresp(3) return redis.call('zscore', 'z', 'm')['double']",
               "redis.setresp(3) return redis.call('get', 'nokey') == nil",
               "redis.setresp(3) return redis.call('smembers', 'noset')",
               "return {double=3.14}", "return {double=1e300}", "return {map={a=1}}",
               "return {set={a=true}}", "return {big_number='123'}",
               "return {verbatim_string={format='txt', string='hi'}}",
               "return true", "return false", "return {true, false, 1}")
    for s in scripts:
        assert enc(mine.execute_command("EVAL", s, 0)) == ref.execute_command("EVAL", s, 0), s
    # the same scripts for a RESP2 client
    mine2 = kv.client()
    ref2 = redis.Redis(port=reference.connection_pool.connection_kwargs["port"])
    for s in scripts:
        assert mine2.execute_command("EVAL", s, 0) == ref2.execute_command("EVAL", s, 0), s


def test_functions(r, reference):
    code = ("#!lua name=lib\n"
            "redis.register_function('f', function(keys, args) return {keys[1], args[1]} end)\n"
            "redis.register_function{function_name='g', callback=function() return 1 end,"
            " flags={'no-writes'}, description='d'}")
    for cli in (r, reference):
        cli.execute_command("FUNCTION", "FLUSH")
    for cmd in (("FUNCTION", "LOAD", code), ("FUNCTION", "LOAD", code), ("FCALL", "f", 1, "k", "a"),
                ("FCALL", "F", 0), ("FCALL_RO", "f", 0), ("FCALL_RO", "g", 0),
                ("FCALL", "nope", 0), ("FUNCTION", "DELETE", "nope"),
                ("FUNCTION", "RESTORE", "bad"), ("FUNCTION", "LOAD", "return 1"),
                ("FUNCTION", "LOAD", "#!lua name=a\nx = 1"), ("FUNCTION", "KILL")):
        mine, ref = both(r, reference, *cmd)
        assert enc(mine) == ref, cmd
    dump = reference.execute_command("FUNCTION", "DUMP")
    r.execute_command("FUNCTION", "FLUSH")
    assert r.connection_pool.get_connection("x") is not None
    raw = redis.Redis(port=r.connection_pool.connection_kwargs["port"])
    assert raw.execute_command("FUNCTION", "RESTORE", dump) == b"OK"
    assert len(raw.execute_command("FUNCTION", "LIST")) == 1
    assert r.execute_command("FCALL", "g", 0) == 1


def test_register_script_and_lock(r):
    incr = r.register_script("return redis.call('incrby', KEYS[1], ARGV[1])")
    assert incr(keys=["n"], args=[5]) == 5
    assert incr(keys=["n"], args=[5]) == 10
    lock = r.lock("res", timeout=5)
    assert lock.acquire(blocking=False)
    assert lock.extend(2)
    lock.release()
    assert r.get("res") is None


def test_busy_script_and_kill(kv, r):
    """Twice (EVAL's state keeps its count hook between runs: the second
    busy script is caught as the first, one swallowing errors in pcall
    too), and the runs after a kill are not hooked to fail."""
    r.config_set("lua-time-limit", 100)
    other = kv.client()
    for body in ("while true do end", "while true do pcall(function() end) end"):
        errors = []

        def run():
            try:
                kv.client().eval(body, 0)
            except redis.ResponseError as e:
                errors.append(str(e))

        t = threading.Thread(target=run)
        t.start()
        time.sleep(0.5)
        with pytest.raises(redis.ResponseError, match="^BUSY"):
            other.ping()
        assert other.execute_command("SCRIPT", "KILL") in ("OK", b"OK")
        t.join(5)
        assert errors and "Script killed" in errors[0]
        assert other.ping()
        assert r.eval("local x = 0 for i = 1, 300000 do x = x + i end return x", 0) == 45000150000


def test_unkillable_after_write(kv, r):
    r.config_set("lua-time-limit", 100)
    other = kv.client()

    def run():
        try:
            kv.client().eval("redis.call('set','x','y') local t = redis.call('time')[1] "
                             "while redis.call('time')[1] - t < 2 do end", 0)
        except redis.ResponseError:
            pass

    t = threading.Thread(target=run)
    t.start()
    # the script may start late on a loaded machine (or under the
    # sanitizers): ask until it is running, then it must be unkillable
    deadline = time.time() + 10
    while True:
        try:
            other.execute_command("SCRIPT", "KILL")
            raise AssertionError("SCRIPT KILL succeeded on a script that wrote")
        except redis.ResponseError as e:
            if str(e).startswith("NOTBUSY") and time.time() < deadline:
                time.sleep(0.05)
                continue
            assert str(e).startswith("UNKILLABLE"), str(e)
            break
    t.join(5)
    assert other.get("x") in ("y", b"y")


def test_hostile_scripts(kv):
    r = kv.client(socket_timeout=120, decode_responses=True)  # filling 512 MiB takes seconds
    # unbounded allocation: an error (the Lua heap is capped), not a crash
    with pytest.raises(redis.ResponseError, match="not enough memory"):
        r.eval("local t = {} local s = string.rep('x', 1000000) "
               "while true do t[#t + 1] = s .. #t end", 0)
    assert r.eval("return 1", 0) == 1
    with pytest.raises(redis.ResponseError):
        r.eval("local function f(n) return f(n + 1) + 1 end return f(1)", 0)
    big = r.eval("local t = {} for i = 1, 100000 do t[i] = i end return t", 0)
    assert len(big) == 100000
    assert r.ping()


def test_aof_persists_effects_and_functions(kv_factory, tmp_path):
    s = kv_factory("--appendonly", "yes")
    c = s.client()
    c.eval("redis.call('set','a','1') redis.call('incr','a')", 0)
    c.execute_command("FUNCTION", "LOAD",
                      "#!lua name=l\nredis.register_function('h', function() return 7 end)")
    c.execute_command("BGREWRITEAOF")
    time.sleep(1)
    c.eval("redis.call('set','b','2')", 0)
    s.restart() if hasattr(s, "restart") else None
    c = s.client()
    assert c.get("a") in ("2", b"2")
    assert c.execute_command("FCALL", "h", 0) == 7


def test_arguments_beyond_the_lua_heap(kv):
    """KEYS and ARGV that do not fit under the Lua heap's 512 MB cap: a
    clear error for EVAL, EVALSHA and FCALL (not a Lua panic ending the
    server), and the calls after work, with arguments as large as fit."""
    r = kv.client(socket_timeout=120)
    big = [bytes([65 + i]) * (180 << 20) for i in range(3)]  # distinct: Lua interns strings
    sha = r.script_load("return #KEYS + #ARGV")
    r.execute_command("FUNCTION", "LOAD",
                      "#!lua name=big\nredis.register_function('n', function(k, a) return #k + #a end)")
    for call in (lambda *a: r.eval("return #KEYS + #ARGV", 1, *a),
                 lambda *a: r.evalsha(sha, 1, *a),
                 lambda *a: r.execute_command("FCALL", "n", 1, *a)):
        with pytest.raises(redis.ResponseError, match="not enough memory for the script's keys"):
            call(*big)
        assert r.ping()
        assert call(*big[:2]) == 2
        assert call("k", "a") == 2


def test_shutdown_nosave_ends_busy_script(kv):
    kv.expect_exit = True
    c = kv.client()
    c.config_set("busy-reply-threshold", 100)
    assert c.config_get("lua-time-limit") == {"lua-time-limit": "100"}

    def run():
        try:
            kv.client().eval("redis.call('set','q','1') while true do end", 0)
        except (redis.ResponseError, redis.ConnectionError):
            pass

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.5)
    other = kv.client()
    with pytest.raises(redis.ResponseError, match="^BUSY"):
        other.execute_command("FUNCTION", "KILL")  # an EVAL runs: FUNCTION KILL is refused
    try:
        other.execute_command("SHUTDOWN", "NOSAVE")
    except redis.ConnectionError:
        pass
    t.join(5)
    kv.proc.wait(5)


def test_functions_in_multi_and_watch(r):
    r.execute_command("FUNCTION", "LOAD",
                      "#!lua name=m\nredis.register_function('w', function(k) "
                      "return redis.call('incr', k[1]) end)")
    w = r.pipeline(transaction=True)
    w.execute_command("FCALL", "w", 1, "n")
    w.eval("return redis.call('incr', KEYS[1])", 1, "n")
    assert w.execute() == [1, 2]
    # a script's write touches WATCHed keys
    p = r.pipeline(transaction=True)
    p.watch("n")
    r.eval("return redis.call('incr', KEYS[1])", 1, "n")
    p.multi()
    p.get("n")
    with pytest.raises(redis.WatchError):
        p.execute()


def _as_user(cli, user, pw):
    """A new connection of cli's server authenticated as user."""
    kw = cli.connection_pool.connection_kwargs
    c = redis.Redis(host=kw["host"], port=kw["port"], socket_timeout=10)
    c.execute_command("AUTH", user, pw)
    return c


ACL_SCRIPTS = [
    "return redis.acl_check_cmd('set','xx',1)",
    "return redis.acl_check_cmd('hset','xx','f',1)",
    "return redis.acl_check_cmd('set','yy',1)",
    "return redis.acl_check_cmd('get')",
    "return redis.acl_check_cmd('config','get')",
    "return redis.acl_check_cmd('config','foo')",
    "return redis.acl_check_cmd('invalid-cmd','arg')",
    "return redis.acl_check_cmd()",
    "return redis.acl_check_cmd('set', {})",
    "return redis.call('hset','xx','f',1)",
    "return redis.pcall('set','yy',1)",
    "return redis.call('set','xx',1)",
    "return redis.pcall('publish','bar','m')",
]


def test_acl_in_scripts(r, reference):
    """redis.call honours the caller's ACL; redis.acl_check_cmd answers it
    (a boolean, nothing logged); both as Redis 7.0 words them."""
    out = []
    for cli in (r, reference):
        cli.execute_command("ACL", "SETUSER", "bob", "on", ">123", "+@scripting", "+set",
                            "~x*")
        cli.execute_command("ACL", "LOG", "RESET")
        bob = _as_user(cli, "bob", "123")
        res = []
        for body in ACL_SCRIPTS:
            try:
                res.append(bob.eval(body, 1, "xx"))
            except redis.ResponseError as e:
                res.append(("error", str(e)))
        bob.close()
        log = cli.execute_command("ACL", "LOG")
        res.append(sorted(enc(e[e.index("object") + 1] if "object" in e else
                              e[e.index(b"object") + 1]) for e in log))
        out.append(res)
    assert enc(out[0]) == out[1]


def test_min_replicas_refuse_script_writes(r, reference):
    """With min-replicas-to-write and no replica, a script that may write
    (shebang without no-writes) and a write from a legacy one: NOREPLICAS."""
    out = []
    for cli in (r, reference):
        cli.set("x", "some value")
        cli.config_set("min-replicas-to-write", 1)
        res = []
        for body in ("#!lua flags=no-writes\nreturn redis.call('get','x')",
                     "return redis.call('get','x')", "#!lua\nreturn redis.call('get','x')",
                     "return redis.call('set','x', 1)",
                     "return redis.pcall('set','x', 1)"):
            try:
                res.append(cli.eval(body, 1, "x"))
            except redis.ResponseError as e:
                res.append(("error", str(e)))
        cli.config_set("min-replicas-to-write", 0)
        res.append(cli.eval("return redis.call('set','x', 2)", 1, "x"))
        out.append(res)
    assert enc(out[0]) == out[1]


def test_keys_argv_fresh_every_run(r, reference):
    """KEYS and ARGV are refilled in place from run to run in brisk-kv: what
    one script does to them (new entries, holes, a metatable, table.insert,
    rawset) is never seen by the next, as in Redis where each run gets new
    tables."""
    show = ("local k = {} for key, v in pairs(KEYS) do k[#k+1] = tostring(key) .. '=' .. v end "
            "local a = {} for key, v in pairs(ARGV) do a[#a+1] = tostring(key) .. '=' .. v end "
            "table.sort(k) table.sort(a) "
            "return {#KEYS, #ARGV, table.concat(k, ','), table.concat(a, ','), "
            "tostring(getmetatable(KEYS)), tostring(KEYS[9]), tostring(ARGV.x)}")
    spoil = [
        "KEYS.x = 'bad' KEYS[5] = 'y' table.insert(ARGV, 'z') return 1",
        "KEYS[1] = nil ARGV[2] = nil return 1",
        "setmetatable(KEYS, {__index = function() return 'mt' end}) return 1",
        "rawset(ARGV, 'x', 'raw') return 1",
        "for i = 1, 100 do ARGV[i] = 'v' .. i end return #ARGV",
        "KEYS[0] = 'zero' KEYS[1.5] = 'half' return 1",
        "KEYS[1] = 'other' ARGV[1] = 7 ARGV[2] = false return 1",
        "KEYS[2] = KEYS[1] return 1",
    ]
    calls = [("2", "a", "b", "c", "d", "e"), ("0",), ("1", "q"), ("3", "x", "y", "z"),
             ("0", *[str(i) for i in range(300)]), ("1", "k")]
    out = []
    for cli in (r, reference):
        res = []
        for s in spoil:
            for args in calls:
                res.append(cli.eval(s, *args))
                res.append(cli.eval(show, *args))
        # through EVALSHA too (the cached entry path)
        sha = cli.script_load(show)
        res.append(cli.evalsha(sha, 1, "one", "two"))
        res.append(cli.evalsha(sha.upper(), 0, "x"))
        res.append(cli.evalsha(sha, 2, "a", "b"))
        out.append(res)
    assert enc(out[0]) == out[1]


def test_call_reply_scalars(r, reference):
    """redis.call's integer and bulk replies (converted without the general
    RESP parser) as Redis gives them: negative, the int64 ends, more than 18
    digits, empty, binary with CR LF inside, missing, in RESP2 and RESP3."""
    body = ("redis.setresp(tonumber(ARGV[1])) "
            "redis.call('set', KEYS[1], ARGV[2]) "
            "local a = redis.call('incrby', KEYS[1], ARGV[3]) "
            "local b = redis.call('get', KEYS[1]) "
            "local c = redis.call('get', KEYS[1] .. ':missing') "
            "redis.call('set', KEYS[2], ARGV[4]) "
            "local d = redis.call('get', KEYS[2]) "
            "return {type(a), tostring(a), b, type(c), tostring(c), d, #d, "
            "redis.call('strlen', KEYS[2]), redis.call('del', KEYS[1] .. ':missing')}")
    cases = [("0", "-5"), ("-9223372036854775807", "-1"), ("9223372036854775806", "1"),
             ("123456789012345678", "1"), ("1", "-100")]
    values = ["", "a\r\nb", "\x00\xff", "x" * 1000]
    for resp in ("2", "3"):
        for start, by in cases:
            for v in values:
                mine, ref = both(r, reference, "EVAL", body, "2", "n", "s", resp, start, by, v)
                assert enc(mine) == ref, (resp, start, by, v)


def _replica_stream(port, run):
    """The replication stream a fake replica gets from the server on port
    while run() sends commands (PINGs left out)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"REPLCONF listening-port 1\r\n")
    assert s.recv(100).startswith(b"+OK")
    s.sendall(b"PSYNC ? -1\r\n")
    buf = b""
    deadline = time.time() + 20
    while True:  # +FULLRESYNC, then the RDB as $<len> and its bytes
        assert time.time() < deadline, buf[:200]
        buf += s.recv(65536)
        j = buf.find(b"\r\n$")
        i = buf.find(b"\r\n", j + 2) if j >= 0 else -1
        if i >= 0 and len(buf) >= i + 2 + int(buf[j + 3:i]):
            rest = buf[i + 2 + int(buf[j + 3:i]):]
            break
    run()
    s.settimeout(0.5)
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            rest += d
    except socket.timeout:
        pass
    s.close()
    return rest.replace(b"*1\r\n$4\r\nPING\r\n", b"")


def test_script_effects_stream_as_redis(r, reference):
    """What replicas get from scripts and transactions, byte for byte as
    Redis 7.0 streams it: one written command goes alone, more than one
    inside MULTI/EXEC, nothing for a read."""
    def run(cli):
        cli.eval("return redis.call('incr', KEYS[1])", 1, "c")
        cli.eval("redis.call('incr', KEYS[1]) return redis.call('incr', KEYS[2])", 2, "c", "d")
        cli.eval("return redis.call('get', KEYS[1])", 1, "c")
        cli.eval("redis.call('select', 3) return redis.call('set', KEYS[1], 'v')", 1, "e")
        p = cli.pipeline(transaction=True)
        p.incr("c").get("c")
        p.execute()
        p = cli.pipeline(transaction=True)
        p.incr("c").incr("d")
        p.execute()
        p = cli.pipeline(transaction=True)
        p.eval("return redis.call('incr', KEYS[1])", 1, "c")
        p.execute()
        p = cli.pipeline(transaction=True)
        p.eval("redis.call('incr', KEYS[1]) return redis.call('incr', KEYS[1])", 1, "c")
        p.set("x", "1")
        p.execute()

    for cli in (r, reference):
        cli.config_set("repl-diskless-sync", "no")
    mine = _replica_stream(r.connection_pool.connection_kwargs["port"], lambda: run(r))
    ref = _replica_stream(reference.connection_pool.connection_kwargs["port"],
                          lambda: run(reference))
    assert mine == ref
    assert mine.count(b"MULTI") == 3


def test_script_effects_aof(kv_factory, tmp_path):
    """The AOF gets what Redis 7.0 writes: a script or EXEC that wrote one
    command as that command alone, one that wrote more inside MULTI/EXEC
    (and, replayed, the same data)."""
    s = kv_factory("--appendonly", "yes", "--dir", str(tmp_path))
    c = s.client()
    c.eval("return redis.call('incr', KEYS[1])", 1, "c")
    c.eval("redis.call('incr', KEYS[1]) return redis.call('incr', KEYS[2])", 2, "c", "d")
    c.eval("return redis.call('get', KEYS[1])", 1, "c")
    p = c.pipeline(transaction=True)
    p.incr("c").get("c")
    p.execute()
    p = c.pipeline(transaction=True)
    p.set("e", "x").eval("return redis.call('incr', KEYS[1])", 1, "d")
    p.execute()
    time.sleep(1.2)  # appendfsync everysec: the buffer is written every loop pass
    aof = (tmp_path / "appendonlydir" / "appendonly.aof.1.incr.aof").read_bytes()
    cmd = lambda *a: b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in a)
    assert aof == (cmd(b"SELECT", b"0") + cmd(b"incr", b"c")
                   + cmd(b"MULTI") + cmd(b"incr", b"c") + cmd(b"incr", b"d") + cmd(b"EXEC")
                   + cmd(b"INCRBY", b"c", b"1")  # redis-py's incr
                   + cmd(b"MULTI") + cmd(b"SET", b"e", b"x") + cmd(b"incr", b"d") + cmd(b"EXEC"))
    s.stop()
    s.start()
    c = s.client()
    assert c.mget("c", "d", "e") == [b"3", b"2", b"x"]


def test_evalsha_many_scripts_any_case(r, reference):
    """100 scripts called in turn (more than the sha cache's slots: shared
    slots must still run the right script), their shas in any letter case,
    NOSCRIPT for all after SCRIPT FLUSH, the right ones after a reload."""
    import random
    rnd = random.Random(7)
    bodies = ["return %d" % i for i in range(100)]
    out = []
    for cli in (r, reference):
        shas = [cli.script_load(b) for b in bodies]
        shas = [x.decode() if isinstance(x, bytes) else x for x in shas]
        res = []
        for _ in range(600):
            i = rnd.randrange(100)
            sha = "".join(ch.upper() if rnd.random() < 0.5 else ch for ch in shas[i])
            res.append((i, cli.evalsha(sha, 0)))
        cli.script_flush()
        for i in (0, 5, 99):
            with pytest.raises(redis.exceptions.NoScriptError):
                cli.evalsha(shas[i], 0)
        cli.script_load(bodies[5])
        res.append(cli.evalsha(shas[5].upper(), 0))
        with pytest.raises(redis.exceptions.NoScriptError):
            cli.evalsha(shas[6], 0)
        out.append(res)
        rnd = random.Random(7)
    assert out[0] == out[1]
    assert all(i == v for i, v in out[0][:-1])


def test_evalsha_after_flush_and_reload(r, reference):
    for cli in (r, reference):
        sha = cli.script_load("return redis.call('incr', KEYS[1])")
        assert cli.evalsha(sha, 1, "n") == 1
        cli.script_flush()
        with pytest.raises(redis.exceptions.NoScriptError):
            cli.evalsha(sha, 1, "n")
        assert cli.script_load("return redis.call('incr', KEYS[1])") in (sha, sha.encode())
        assert cli.evalsha(sha, 1, "n") == 2
        # the command cache of redis.call follows the name as written
        assert cli.eval("return {redis.call('INCR', KEYS[1]), redis.call('incr', KEYS[1]),"
                        " redis.call('InCr', KEYS[1]), redis.pcall('get', KEYS[1])}", 1, "n") \
            in ([3, 4, 5, "5"], [3, 4, 5, b"5"])


def test_script_debug(r, reference):
    """SCRIPT DEBUG's replies as Redis's (the debugger sessions themselves:
    test_kv_ldb.py)."""
    for args in (("NO",), ("no",), ("maybe",), ("yes", "x"), ("YES",), ("sync",), ("no",)):
        mine, ref = both(r, reference, "SCRIPT", "DEBUG", *args)
        assert enc(mine) == ref, args
    out = []
    for cli in (r, reference):
        p = cli.pipeline(transaction=True)
        p.execute_command("SCRIPT", "DEBUG", "NO")
        p.execute_command("SCRIPT", "DEBUG", "YES")
        out.append([str(x) for x in p.execute(raise_on_error=False)])
    assert out[0] == out[1]
    assert r.eval("return 1", 0) == 1


# struct as Redis's: alignment ("!n"), integers of up to 32 bytes, c0, s,
# the error texts (argument numbers included).
STRUCT_CASES = [
 "return struct.pack('!4 b i', 1, 2)", "return struct.pack('!b d', 1, 2.5)", "return struct.pack('!2 b h b i', 1, 2, 3, 4)",
 "return struct.pack('! b l', 1, 2)", "return struct.pack('!3 b i', 1, 2)", "return struct.size('!4 b i')", "return struct.size('b i d')",
 "return struct.size('!8 b d')", "return {struct.unpack('!4 b i', struct.pack('!4 b i', 1, 2))}",
 "return struct.pack('>i16', 1)", "return struct.pack('<i16', -1)", "return {struct.unpack('>i16', struct.pack('>i16', -2))}",
 "return struct.pack('i33', 1)", "return struct.pack('i3000000000', 1)", "return {struct.unpack('<I12', string.rep('\\255', 12))}",
 "return struct.size('i16i32')", "return {struct.unpack('>i9', string.rep('\\0', 8) .. '\\5')}", "return {struct.unpack('>i9', string.rep('\\255', 9))}",
 "return {struct.unpack('<i9', string.rep('\\255', 9))}", "return struct.pack('i0', 5)", "return struct.pack('c0', 'abc')",
 "return {struct.unpack('b c0', struct.pack('b c0', 3, 'xyz'))}", "return struct.pack('s', 'ab')", "return {struct.unpack('s s', 'ab\\0cd\\0')}",
 "return struct.pack('z', 1)", "return struct.size('s')", "return struct.size('c0')", "return struct.pack('h', 70000)", "return struct.pack('B', -1)",
 "return struct.pack('d', 1.5)", "return {struct.unpack('f', struct.pack('f', 1.5))}", "return {struct.unpack('i', 'abcd', 2)}", "return {struct.unpack('i', 'abcdefgh', 0)}",
 "return {struct.unpack('xxb', 'abc')}", "return struct.pack('x')", "return struct.pack('>I3', 0x123456)", "return struct.pack('c3', 'ab')", "return struct.pack('c2', 'abcd')",
 "return struct.pack('l', 2^63)", "return struct.pack('L', -1)", "return struct.pack('i', 1.9)", "return struct.pack('i', -1.9)", "return {struct.unpack('I', '\\255\\255\\255\\255')}",
 "return struct.pack('!5 b', 1)", "return struct.pack('!', 1)", "return struct.pack('=i', 1)", "return {struct.unpack('>H', 'a')}", "return struct.pack()", "return struct.pack('i')",
 "return struct.pack('i', 'x')", "return struct.pack('i', '12')", "return {struct.unpack('c', '')}", "return {struct.unpack('!4 b x i', 'a' .. string.rep('\\0', 7) .. 'bcde')}",
 "return struct.size('x')", "return struct.size('!4 h x i')", "return {struct.unpack('T', string.rep('\\1', 8))}", "return struct.pack('Y', 1)", "return {struct.unpack('Y', 'a')}",
]


@pytest.mark.parametrize("script", STRUCT_CASES)
def test_struct_matches_redis(kv, reference, script):
    raw = kv.client()  # bytes replies: packed data is binary
    mine, ref = both(raw, reference, "EVAL", script, 0)
    raw.close()
    assert mine == ref


# cmsgpack against Redis's: every encoding width, tables as arrays or maps,
# the unpack variants and the two decode errors.
MP_H = ("local function h(s) local o = {} for i = 1, #s do o[i] = string.format('%02x', "
        "string.byte(s, i)) end return table.concat(o) end ")
MP_VALS = ["1", "-1", "127", "128", "-32", "-33", "255", "256", "65535", "65536", "-129", "-32769", "2^32", "2^53", "-2^53", "2^63", "2^64",
        "0.5", "1.5", "-0.1", "1/0", "-1/0", "0/0", "'a'", "string.rep('x', 31)", "string.rep('x', 32)", "string.rep('x', 256)", "string.rep('x', 65536)",
        "true", "false", "nil", "{}", "{1,2,3}", "{a=1}", "{1,2,nil,4}", "{[1]=1,[3]=3}", "{[0]=1}", "{[1.5]=1}", "{1, {2, {3}}}",
        "(function() local t = {} for i=1,16 do t[i]=i end return t end)()", "(function() local t = {} for i=1,20 do t['k'..i]=i end return t end)()"]
MP_CASES = [MP_H + "return h(cmsgpack.pack(%s))" % v for v in MP_VALS] + [
  "return {cmsgpack.unpack(cmsgpack.pack(1, 'a', {1,2}))}", "return cmsgpack.unpack('')", "return {pcall(cmsgpack.unpack, '\\xc1')}",
  "return {cmsgpack.unpack('\\x93\\x01\\x02')}", "return cmsgpack.pack()", "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2), 0)}",
  "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 1)}", "return {cmsgpack.unpack(string.char(0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0))}",
  "return cmsgpack.unpack(string.char(0xd9, 3) .. 'abc')", "return {cmsgpack.unpack(string.char(0xde, 0, 1, 0xa1, 0x61, 1))}",
  "return cjson.encode(cmsgpack.unpack(cmsgpack.pack({a={b={c={1,2}}}})))", "return {cmsgpack.unpack(string.char(0xc4, 2) .. 'ab')}",
  "return {cmsgpack.unpack(string.char(0xcf, 0,0,0,0,0,0,0,5))}", "return {cmsgpack.unpack(string.char(0xd3, 255,255,255,255,255,255,255,251))}",
]


@pytest.mark.parametrize("script", MP_CASES)
def test_cmsgpack_matches_redis(kv, reference, script):
    raw = kv.client()
    mine, ref = both(raw, reference, "EVAL", script, 0)
    raw.close()
    assert mine == ref


@pytest.mark.parametrize("protocol", [2, 3])
def test_script_booleans_by_script_resp(kv, reference, protocol):
    """A boolean converts by the script's RESP (redis.setresp), then the
    client's: a RESP3 script's false reaches a RESP2 client as 0."""
    ref_port = reference.connection_pool.connection_kwargs["port"]
    out = []
    for port in (kv.port, ref_port):
        cli = redis.Redis(port=port, protocol=protocol)
        res = []
        for body in ("return true", "return false", "redis.setresp(3) return true",
                     "redis.setresp(3) return false", "redis.setresp(3) return {true, false, 1}",
                     "return {true, false, 1}", "redis.setresp(3) return redis.call('exists', 'x') == 1"):
            res.append(cli.eval(body, 0))
        cli.close()
        out.append(res)
    assert out[0] == out[1]


# Lua errors of every kind, redis.call refusals and error/status texts,
# side by side (the pcall/incr case needs state: left out).
ERROR_CASES = ["error('x')", "error('x', 0)", "error('x', 2)", "error(123)", "error({err='A b'})", "error({err='no-code'})",
 "local x = nil; return x.y", "return 1 + {}", "return #nil", "return ('x')()",
 "return redis.call('set', 'a')", "return redis.pcall('set', 'a')", "redis.call('set','str','x') return redis.call('incr','str')",
 "return {err='line1\\nline2'}", "return redis.error_reply('x\\r\\ny')", "return redis.status_reply('a\\nb')", "return {ok=5}", "return {err=5}",
 "local ok, e = pcall(error, {err='X y'}) return e.err", "local ok, e = pcall(error) return tostring(e)", "return xpcall(function() error('q') end, function(m) return 'h:' .. m end)",
 "return {xpcall(function() error('q') end, function(m) return 'h:' .. m end)}", "return coroutine.wrap(function() error('in co') end)()",
 "return {coroutine.resume(coroutine.create(function() error('in co') end))}", "return string.rep('x', -1)", "return tostring(nil) .. nil",
 "local t = setmetatable({}, {__index = function(t, k) return t[k] end}) return t.x", "return math.floor('a')", "return redis.call('lpush', 'l')", "return redis.call('EVAL', 'return 1', 0)",
 "return redis.call('multi')", "return redis.call('subscribe', 'c')", "return redis.call('select', 100)", "return redis.call('auth', 'x')", "return redis.call('shutdown')",
 "return redis.call('script', 'load', 'return 1')", "return redis.call('function', 'flush')", "return redis.call('monitor')", "return redis.call('wait', 0, 0)",
 "return redis.call('blpop', 'l', 0)", "return redis.call('client', 'pause', 10)", "return redis.call('debug', 'sleep', 0)", "return redis.pcall('nosuch') ",
 "return redis.call('ping', 'a\\nb')", "return redis.call('echo', string.rep('x', 10))", "return unpack({1,2,3})", "return select(2, 'a', 'b')", "return (nil)",
]


@pytest.mark.parametrize("script", ERROR_CASES)
def test_errors_match_redis(kv, reference, script):
    raw = kv.client()
    mine, ref = both(raw, reference, "EVAL", script, 0)
    raw.close()
    assert mine == ref


def test_error_tables_redis_crashes_on(r):
    """error({}) and error({err={}}) crash redis-server 7.0.15 (SIGSEGV in
    luaCallFunction); brisk-kv answers an error and stays up."""
    for body in ("error({})", "error({err={}})", "error(true)",
                 "error(setmetatable({}, {__tostring=function() return 'ts' end}))"):
        with pytest.raises(redis.ResponseError):
            r.eval(body, 0)
    assert r.ping()


def test_script_flags_on_a_stale_replica(r, reference):
    """A replica without its master and replica-serve-stale-data no: EVAL,
    EVALSHA and FCALL take the script's flags (only allow-stale scripts run,
    and only stale-safe commands inside them), SCRIPT LOAD still works; as
    Redis 7.0."""
    lib = ("#!lua name=stalelib\n"
           "redis.register_function{function_name='fs', callback=function() return 'ok' end, "
           "flags={'allow-stale','no-writes'}}\n"
           "redis.register_function('fn', function() return 'no' end)")
    for cli in (r, reference):
        cli.set("x", "val")
        cli.function_load(lib, replace=True)
        cli.config_set("replica-serve-stale-data", "no")
        cli.execute_command("REPLICAOF", "127.0.0.1", "1")
    try:
        cases = [
            ("EVAL", "return redis.call('get','x')", 1, "x"),
            ("EVAL", "#!lua flags=no-writes\nreturn 1", 0),
            ("EVAL", "#!lua\nreturn 1", 0),
            ("EVAL", "#!lua flags=allow-stale,no-writes\nreturn 1", 0),
            ("EVAL", "#!lua flags=allow-stale,no-writes\nreturn redis.call('get','x')", 1, "x"),
            ("EVAL", "#!lua flags=allow-stale,no-writes\nreturn redis.pcall('get','x')", 1, "x"),
            ("EVAL", "#!lua flags=allow-stale,no-writes\nreturn redis.call('echo','foobar')", 0),
            ("EVAL", "#!lua flags=allow-stale\nreturn 1", 0),
            ("EVAL_RO", "#!lua flags=allow-stale,no-writes\nreturn 2", 0),
            ("SCRIPT", "LOAD", "#!lua flags=allow-stale,no-writes\nreturn redis.call('echo','e')"),
            ("EVALSHA", "d0b7d4ac47ab84b0f3ca07c4c1eb1bbb0af4a2e8", 0),
            ("FCALL", "fs", 0), ("FCALL", "fn", 0), ("FCALL_RO", "fs", 0),
            ("GET", "x"), ("PING",),
        ]
        for cmd in cases:
            mine, ref = both(r, reference, *cmd)
            assert enc(mine) == ref, cmd
    finally:
        for cli in (r, reference):
            cli.execute_command("REPLICAOF", "NO", "ONE")
            cli.config_set("replica-serve-stale-data", "yes")


def test_exec_aborts_queued_writing_script_on_read_only_replica(r, reference, kv_factory,
                                                                tmp_path):
    """A shebang script without no-writes queued in MULTI is a write: EXEC
    on a read-only replica aborts the transaction (READONLY), a legacy one
    fails inside; as Redis 7.0."""
    master = kv_factory(workdir=tmp_path / "m")
    out = []
    for cli in (r, reference):
        got = []
        conn1 = cli.connection_pool.get_connection("MULTI")
        conn2 = cli.connection_pool.get_connection("MULTI")
        try:
            for conn, script in ((conn1, "#!lua\nreturn 1"),
                                 (conn2, "redis.call('set','x',1)\nreturn 1")):
                conn.send_command("MULTI")
                conn.read_response()
                conn.send_command("EVAL", script, 1, "x")
                conn.read_response()
            cli.execute_command("REPLICAOF", "127.0.0.1", str(master.port))
            for conn in (conn1, conn2):
                conn.send_command("EXEC")
                try:
                    got.append(conn.read_response())
                except redis.ResponseError as e:
                    got.append(("error", str(e).split(" script:")[0]))
        finally:
            cli.connection_pool.release(conn1)
            cli.connection_pool.release(conn2)
            cli.execute_command("REPLICAOF", "NO", "ONE")

        def norm(x):
            if isinstance(x, list):
                return [norm(y) for y in x]
            if isinstance(x, Exception):
                return ("error", type(x).__name__, str(x))
            return enc(x)
        out.append(norm(got))
    assert out[0] == out[1], out


def test_busy_script_does_not_serve_blocked_clients(kv_factory):
    """A client blocked on a key the busy script pushed to is served after
    the script, not when another client runs a command allowed during BUSY
    (HELLO): it pops the script's last element, as with Redis (its suite's
    'Timedout scripts and unblocked command')."""
    import threading
    kv = kv_factory("--enable-debug-command", "yes")
    r = kv.client(decode_responses=True)
    r.config_set("busy-reply-threshold", 10)
    r.execute_command("DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1")
    popped, ran = {}, {}
    blocker = kv.client(decode_responses=True)
    tb = threading.Thread(target=lambda: popped.setdefault("v", blocker.blpop("x", 0)))
    tb.start()
    deadline = time.time() + 10
    while r.info("clients")["blocked_clients"] != 1 and time.time() < deadline:
        time.sleep(0.01)
    script = """
        local clients
        redis.call('lpush', KEYS[1], 'y')
        while true do
            clients = redis.call('client', 'list')
            if string.find(clients, 'abortscript') ~= nil then break end
        end
        redis.call('lpush', KEYS[1], 'z')
        return 'done'"""
    ts = threading.Thread(target=lambda: ran.setdefault(
        "v", kv.client(decode_responses=True).eval(script, 1, "x")))
    ts.start()
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            r.ping()
            time.sleep(0.01)
        except redis.ResponseError as e:
            assert "BUSY" in str(e)
            break
    other = kv.client(decode_responses=True)
    other.execute_command("HELLO", "2", "SETNAME", "abortscript")
    ts.join(10)
    tb.join(10)
    assert ran.get("v") == "done"
    assert list(popped.get("v")) == ["x", "z"]
    assert r.lrange("x", 0, -1) == ["y"]


def _err_or_reply(cli, *cmd):
    try:
        cli.execute_command(*cmd)
        return "reply"
    except redis.ResponseError as e:
        return str(e)


def test_subcommands_have_their_own_flags(r, reference):
    """A container's subcommand has Redis's flags, not the container's: on a
    stale replica SLOWLOG GET and XGROUP HELP run while FUNCTION LIST and
    OBJECT ENCODING get MASTERDOWN; FUNCTION DELETE is a write (READONLY);
    from a script LATENCY LATEST, CONFIG GET and CLUSTER RESET are refused
    (noscript) and SLOWLOG LEN is not. Side by side with Redis 7.0."""
    for cli in (r, reference):
        cli.set("x", "v")
        cli.xadd("s", {"f": "v"})
    scripted = [("latency", "latest"), ("slowlog", "len"), ("config", "get", "maxmemory"),
                ("cluster", "reset"), ("xgroup", "help"), ("object", "encoding", "x"),
                ("function", "list"), ("script", "exists", "ab")]
    for args in scripted:
        body = "return redis.pcall(" + ",".join(f"'{a}'" for a in args) + ")"
        got = [_err_or_reply(cli, "EVAL", body, 0) for cli in (r, reference)]
        assert got[0] == got[1], args
        got = [_err_or_reply(cli, "EVAL_RO", body, 0) for cli in (r, reference)]
        assert got[0] == got[1], ("EVAL_RO", args)
    for cli in (r, reference):
        cli.config_set("replica-serve-stale-data", "no")
        cli.execute_command("REPLICAOF", "127.0.0.1", "1")
    try:
        cases = [("SLOWLOG", "GET"), ("SLOWLOG", "LEN"), ("SLOWLOG", "HELP"), ("LATENCY", "HELP"),
                 ("LATENCY", "LATEST"), ("XGROUP", "HELP"), ("XINFO", "HELP"),
                 ("XINFO", "STREAM", "s"), ("OBJECT", "HELP"), ("OBJECT", "ENCODING", "x"),
                 ("MEMORY", "USAGE", "x"), ("FUNCTION", "LIST"), ("FUNCTION", "HELP"),
                 ("FUNCTION", "DELETE", "nolib"), ("FUNCTION", "FLUSH"),
                 ("XGROUP", "CREATE", "s", "g", "$"), ("SCRIPT", "EXISTS", "ab"),
                 ("SCRIPT", "HELP"), ("CONFIG", "GET", "maxmemory"), ("CLIENT", "ID"),
                 ("PUBSUB", "CHANNELS"), ("MEMORY", "HELP"), ("ACL", "WHOAMI")]
        for cmd in cases:
            got = [_err_or_reply(cli, *cmd) for cli in (r, reference)]
            assert got[0] == got[1], cmd
        for cli in (r, reference):
            p = cli.pipeline(transaction=True)
            p.execute_command("SLOWLOG", "LEN")
            p.execute_command("FUNCTION", "LIST")
            try:
                p.execute()
                out = "reply"
            except redis.ResponseError as e:
                out = str(e)
            if cli is r:
                mine = out
        assert mine == out
    finally:
        for cli in (r, reference):
            cli.execute_command("REPLICAOF", "NO", "ONE")
            cli.config_set("replica-serve-stale-data", "yes")
