"""brisk-kv over TLS: tls-port beside port, Redis's tls-* options.

Certificates are made with the openssl CLI in a temporary directory: a CA,
a server certificate (localhost / 127.0.0.1), a client certificate, one
from another CA, an expired one."""
from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest
import redis

from kvlib import free_port

REDIS_CLI = shutil.which("redis-cli")
OPENSSL = shutil.which("openssl")

pytestmark = pytest.mark.skipif(not (REDIS_CLI and OPENSSL), reason="needs redis-cli and openssl")


def _ossl(*args, cwd):
    subprocess.run([OPENSSL, *args], cwd=cwd, check=True, capture_output=True)


def _cert(d: Path, name: str, ca: str, cn: str, days: str = "30", san: str | None = None):
    _ossl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
          "-subj", f"/CN={cn}", cwd=d)
    args = ["x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.crt", "-days", days]
    if san:
        (d / f"{name}.ext").write_text(f"subjectAltName={san}\n")
        args += ["-extfile", f"{name}.ext"]
    _ossl(*args, cwd=d)


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tls")
    for ca in ("ca", "otherca"):
        _ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key", "-out",
              f"{ca}.crt", "-days", "30", "-subj", f"/CN={ca}", cwd=d)
    _cert(d, "server", "ca", "localhost", san="DNS:localhost,IP:127.0.0.1")
    _cert(d, "client", "ca", "client")
    _cert(d, "stranger", "otherca", "stranger")
    _cert(d, "expired", "ca", "localhost", days="-1")
    return d


def norm(d: dict) -> dict:
    dec = lambda x: x.decode() if isinstance(x, bytes) else x
    return {dec(k): dec(v) for k, v in d.items()}


def tls_args(d: Path, tls_port: int, auth: str = "no", *extra: str) -> list[str]:
    return ["--tls-port", str(tls_port), "--tls-cert-file", str(d / "server.crt"),
            "--tls-key-file", str(d / "server.key"), "--tls-ca-cert-file", str(d / "ca.crt"),
            "--tls-auth-clients", auth, *extra]


def cli(d: Path, port: int, *cmd: str, cert: str | None = None, tls: bool = True):
    args = [REDIS_CLI, "-p", str(port)]
    if tls:
        args += ["--tls", "--cacert", str(d / "ca.crt")]
    if cert:
        args += ["--cert", str(d / f"{cert}.crt"), "--key", str(d / f"{cert}.key")]
    p = subprocess.run([*args, *cmd], capture_output=True, text=True, timeout=20)
    return p.returncode, p.stdout.strip(), p.stderr.strip()


def tls_client(d: Path, port: int, cert: str | None = None, **kw) -> redis.Redis:
    extra = {}
    if cert:
        extra = {"ssl_certfile": str(d / f"{cert}.crt"), "ssl_keyfile": str(d / f"{cert}.key")}
    return redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=str(d / "ca.crt"),
                       socket_timeout=20, **extra, **kw)


@pytest.fixture
def tls_kv(kv_factory, certs):
    def make(auth: str = "no", *extra: str):
        port = free_port()
        s = kv_factory(*tls_args(certs, port, auth, *extra))
        s.tls_port = port
        return s
    return make


def test_config_get_matches_redis(r, reference):
    ours = r.config_get("tls*")
    theirs = norm(reference.config_get("tls*"))
    assert ours == theirs
    for args in (("tls-auth-clients", "maybe"), ("tls-port", "abc"), ("tls-port", "70000"),
                 ("tls-session-caching", "maybe"), ("tls-session-cache-size", "-1")):
        with pytest.raises(redis.ResponseError) as ours_e:
            r.config_set(*args)
        with pytest.raises(redis.ResponseError) as theirs_e:
            reference.config_set(*args)
        assert str(ours_e.value) == str(theirs_e.value)
    # Stored while tls-port is 0, as Redis.
    for args in (("tls-auth-clients", "optional"), ("tls-cert-file", "/nonexistent"),
                 ("tls-protocols", "TLSv1.2"), ("tls-session-cache-size", "100")):
        assert r.config_set(*args) is True
        assert reference.config_set(*args) is True
    assert r.config_get("tls*") == norm(reference.config_get("tls*"))


def test_tls_replication_config(r, reference):
    # replication over TLS itself: test_kv_tls_repl.py
    for v in ("yes", "no", "maybe"):
        ours = theirs = None
        try:
            ours = r.config_set("tls-replication", v)
        except redis.ResponseError as e:
            ours = str(e)
        try:
            theirs = reference.config_set("tls-replication", v)
        except redis.ResponseError as e:
            theirs = str(e)
        assert ours == theirs
        assert r.config_get("tls-replication") == norm(reference.config_get("tls-replication"))


def test_redis_cli_without_client_certs(tls_kv, certs):
    s = tls_kv("no")
    assert cli(certs, s.tls_port, "PING")[1] == "PONG"
    assert cli(certs, s.tls_port, "SET", "k", "v")[1] == "OK"
    assert cli(certs, s.tls_port, "GET", "k")[1] == "v"
    assert s.client().get("k") == b"v"  # the plain port serves the same data


def test_client_certs_required(tls_kv, certs):
    s = tls_kv("yes")
    assert cli(certs, s.tls_port, "PING", cert="client")[1] == "PONG"
    rc, out, err = cli(certs, s.tls_port, "PING")
    assert out != "PONG"
    rc, out, err = cli(certs, s.tls_port, "PING", cert="stranger")
    assert out != "PONG"
    assert s.client().ping()
    # Failed handshakes are logged at verbose, as Redis logs them.
    assert "TLS handshake with 127.0.0.1" not in s.output()
    s.client().config_set("loglevel", "verbose")
    cli(certs, s.tls_port, "PING", cert="stranger")
    _wait_log(s, "TLS handshake with 127.0.0.1")
    s.client().config_set("loglevel", "notice")
    # optional: a certificate is checked when given, not required
    assert s.client().config_set("tls-auth-clients", "optional")
    assert cli(certs, s.tls_port, "PING")[1] == "PONG"
    assert cli(certs, s.tls_port, "PING", cert="stranger")[1] != "PONG"
    assert norm(s.client().config_get("tls-auth-clients")) == {"tls-auth-clients": "optional"}


def test_runtime_reconfigure(tls_kv, certs):
    s = tls_kv("yes")
    c = s.client()
    with pytest.raises(redis.ResponseError, match="Unable to update TLS configuration"):
        c.config_set("tls-cert-file", str(certs / "nonexistent.crt"))
    assert norm(c.config_get("tls-cert-file"))["tls-cert-file"] == str(certs / "server.crt")
    assert cli(certs, s.tls_port, "PING", cert="client")[1] == "PONG"
    assert c.config_set("tls-auth-clients", "no")
    assert cli(certs, s.tls_port, "PING")[1] == "PONG"
    p2 = free_port()
    assert c.config_set("tls-port", str(p2))
    assert cli(certs, p2, "PING")[1] == "PONG"
    assert cli(certs, s.tls_port, "PING")[1] != "PONG"
    assert c.config_set("tls-port", "0")
    assert cli(certs, p2, "PING")[1] != "PONG"
    assert c.ping()


def test_redis_py_pipeline_10k(tls_kv, certs, reference):
    s = tls_kv("yes")
    t = tls_client(certs, s.tls_port, cert="client")
    results = []
    for c in (t, reference):
        p = c.pipeline(transaction=False)
        for i in range(10000):
            k = f"k{i % 500}"
            [lambda: p.set(k, "x" * (i % 97)), lambda: p.append(k, "yz"),
             lambda: p.incr(f"n{i % 7}"), lambda: p.get(k), lambda: p.rpush("l", i),
             lambda: p.lrange("l", -3, -1)][i % 6]()
        results.append(p.execute())
    assert results[0] == results[1]
    assert len(results[0]) == 10000


def test_large_values(tls_kv, certs):
    s = tls_kv("no")
    t = tls_client(certs, s.tls_port)
    big = b"v" * (4 * 1024 * 1024 + 17)  # many records both ways
    assert t.set("big", big)
    assert t.get("big") == big
    p = t.pipeline(transaction=False)
    for _ in range(20):
        p.get("big")
    assert all(v == big for v in p.execute())
    assert t.strlen("big") == len(big)


def test_wrong_protocol_on_each_port(tls_kv, certs):
    s = tls_kv("no")
    # plain RESP on the TLS port: the handshake fails, the socket closes
    with socket.create_connection(("127.0.0.1", s.tls_port), timeout=5) as sk:
        sk.sendall(b"*1\r\n$4\r\nPING\r\n")
        try:
            data = sk.recv(100)
        except ConnectionResetError:
            data = b""
        assert b"PONG" not in data
    # TLS on the plain port
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    with socket.create_connection(("127.0.0.1", s.port), timeout=5) as sk:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            ctx.wrap_socket(sk, server_hostname="localhost")
    # a peer that stops in the middle of the handshake
    with socket.create_connection(("127.0.0.1", s.tls_port), timeout=5) as sk:
        sk.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    assert s.client().ping()
    assert cli(certs, s.tls_port, "PING")[1] == "PONG"


def _wait_log(s, text, timeout=10.0):
    deadline = time.time() + timeout
    while text not in s.output():
        assert time.time() < deadline, f"{text!r} not logged"
        time.sleep(0.05)


def _garbage(port, n):
    for i in range(n):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sk:
            sk.sendall(b"GET / HTTP/1.0\r\n\r\n" if i % 2 else b"\x16\x03\x01\x00\x05hello")
            try:
                sk.recv(100)
            except OSError:
                pass


def test_failed_handshakes_logged_at_verbose_only(tls_kv, certs):
    """A flood of garbage on the TLS port leaves no line at the default level
    (notice), one line per connection at verbose, as Redis's 'Error accepting
    a client connection' (LL_VERBOSE)."""
    s = tls_kv("no")
    before = s.output().count("\n")
    _garbage(s.tls_port, 200)
    assert s.client().ping()
    assert "TLS handshake" not in s.output()
    assert s.output().count("\n") - before < 5, s.output()[-2000:]
    assert s.client().info("stats")["rejected_connections"] >= 200
    s.client().config_set("loglevel", "verbose")
    _garbage(s.tls_port, 3)
    _wait_log(s, "TLS handshake with 127.0.0.1")
    assert cli(certs, s.tls_port, "PING")[1] == "PONG"


def test_bad_certificates_refused_at_start(kv_factory, certs):
    crt, key = "--tls-cert-file", "--tls-key-file"
    cases = [
        ([crt, str(certs / "expired.crt"), key, str(certs / "expired.key"),
          "--tls-auth-clients", "no"],
         "expired on"),
        ([crt, str(certs / "server.crt"), key, str(certs / "client.key"),
          "--tls-auth-clients", "no"],
         "does not match the certificate"),
        ([crt, str(certs / "missing.crt"), key, str(certs / "server.key"),
          "--tls-auth-clients", "no"],
         "cannot load the certificate chain"),
        ([crt, str(certs / "server.crt"), key, str(certs / "server.key")],
         "tls-ca-cert-file must be set when tls-auth-clients is yes"),
        ([crt, str(certs / "server.crt"), key, str(certs / "server.key"),
          "--tls-auth-clients", "no", "--tls-protocols", "TLSv1.1"], "unsupported TLS protocol"),
    ]
    for args, msg in cases:
        s = kv_factory("--tls-port", str(free_port()), *args, start=False)
        s.expect_exit = True
        s.start(wait=False)
        assert s.proc.wait(10) != 0
        out = s.output()
        assert "Failed to configure TLS" in out and msg in out, out


def test_no_listener_refused(kv_factory):
    s = kv_factory("--port", "0", start=False)
    s.expect_exit = True
    s.start(wait=False)
    assert s.proc.wait(10) != 0
    assert "Configured to not listen anywhere" in s.output()


def test_tls_only(kv_factory, certs):
    port = free_port()
    s = kv_factory(*tls_args(certs, port), "--port", "0", start=False)
    s.start(wait=False)
    for _ in range(100):
        if cli(certs, port, "PING")[1] == "PONG":
            break
        time.sleep(0.1)
    assert cli(certs, port, "PING")[1] == "PONG"
    assert norm(tls_client(certs, port).config_get("port")) == {"port": "0"}
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", s.port), timeout=2).close()


def _s_client(certs, port, *proto):
    p = subprocess.run([OPENSSL, "s_client", "-connect", f"127.0.0.1:{port}", "-CAfile",
                        str(certs / "ca.crt"), "-ign_eof", *proto], input="PING\r\nQUIT\r\n",
                       capture_output=True, text=True, timeout=20)
    return p.returncode, p.stdout + p.stderr


def test_old_protocols_refused(tls_kv, certs):
    s = tls_kv("no")
    rc, out = _s_client(certs, s.tls_port, "-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0")
    assert rc != 0 and "+PONG" not in out
    rc, out = _s_client(certs, s.tls_port, "-tls1_2")
    assert rc == 0 and "Protocol  : TLSv1.2" in out and "+PONG" in out, out
    rc, out = _s_client(certs, s.tls_port, "-tls1_3")
    assert rc == 0 and "TLSv1.3" in out and "+PONG" in out, out
    assert s.client().ping()


def test_benchmark_sanity(tls_kv, certs):
    s = tls_kv("no")
    bench = shutil.which("redis-benchmark")
    if not bench:
        pytest.skip("no redis-benchmark")
    p = subprocess.run([bench, "-p", str(s.tls_port), "--tls", "--cacert", str(certs / "ca.crt"),
                        "-n", "2000", "-c", "4", "-t", "set,get", "-q"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "SET:" in p.stdout and "GET:" in p.stdout
    assert s.client().dbsize() > 0


def test_maxclients_refusal_inside_tls(tls_kv, certs):
    s = tls_kv("no", "--maxclients", "1")
    c = s.client()
    assert c.ping()  # holds the one slot
    t = tls_client(certs, s.tls_port)
    with pytest.raises(redis.ConnectionError, match="max number of clients reached"):
        t.ping()
    c.close()
    time.sleep(0.2)
    assert tls_client(certs, s.tls_port).ping()


def test_encrypted_keys_with_passphrases(kv_factory, certs, tmp_path):
    """tls-key-file-pass and tls-client-key-file-pass, as Redis has them: an
    encrypted server key loads with its passphrase (at start and by CONFIG
    SET), a wrong or missing one stops the start with a clear message (never
    a prompt on a terminal), and a replica's encrypted client key loads
    with tls-client-key-file-pass."""
    pw = "s3cret pass phrase"
    for name in ("server", "client"):
        _ossl("pkey", "-in", str(certs / f"{name}.key"), "-aes256", "-passout", f"pass:{pw}",
              "-out", str(tmp_path / f"{name}-enc.key"), cwd=tmp_path)
    enc = str(tmp_path / "server-enc.key")
    assert b"ENCRYPTED" in (tmp_path / "server-enc.key").read_bytes()
    base = ["--tls-cert-file", str(certs / "server.crt"), "--tls-ca-cert-file",
            str(certs / "ca.crt")]
    port = free_port()
    s = kv_factory("--tls-port", str(port), *base, "--tls-key-file", enc,
                   "--tls-key-file-pass", pw, "--tls-auth-clients", "yes")
    assert cli(certs, port, "PING", cert="client")[1] == "PONG"
    r = s.client()
    assert r.config_get("tls-key-file-pass") == {"tls-key-file-pass": pw}
    # back to the plain key, then the encrypted one again in one CONFIG SET
    assert r.config_set("tls-key-file", str(certs / "server.key")) is True
    assert cli(certs, port, "PING", cert="client")[1] == "PONG"
    assert r.execute_command("CONFIG", "SET", "tls-key-file", enc, "tls-key-file-pass", pw) == b"OK"
    assert cli(certs, port, "PING", cert="client")[1] == "PONG"
    # a wrong passphrase by CONFIG SET is refused, the running key kept
    with pytest.raises(redis.ResponseError):
        r.config_set("tls-key-file-pass", "wrong")
    assert cli(certs, port, "PING", cert="client")[1] == "PONG"

    # a replica presenting an encrypted client key to a master that wants one
    rep = kv_factory("--tls-port", str(free_port()), *base, "--tls-key-file", enc,
                     "--tls-key-file-pass", pw, "--tls-auth-clients", "yes",
                     "--tls-replication", "yes", "--tls-client-cert-file",
                     str(certs / "client.crt"), "--tls-client-key-file",
                     str(tmp_path / "client-enc.key"), "--tls-client-key-file-pass", pw)
    rr = rep.client()
    r.set("k", "v")
    rr.replicaof("127.0.0.1", port)
    deadline = time.time() + 20
    while rr.info("replication").get("master_link_status") != "up" and time.time() < deadline:
        time.sleep(0.05)
    assert rr.info("replication")["master_link_status"] == "up"
    deadline = time.time() + 10
    while rr.get("k") != b"v" and time.time() < deadline:
        time.sleep(0.05)
    assert rr.get("k") == b"v"

    for extra, msg in ((["--tls-key-file-pass", "wrong"], "cannot load the private key"),
                       ([], "cannot load the private key")):
        bad = kv_factory("--tls-port", str(free_port()), *base, "--tls-key-file", enc,
                         "--tls-auth-clients", "no", *extra, start=False)
        bad.expect_exit = True
        bad.start(wait=False)
        assert bad.proc.wait(10) != 0
        out = bad.output()
        assert "Failed to configure TLS" in out and msg in out, out


def test_redis_cli_ldb_over_tls(tls_kv, certs, tmp_path):
    """redis-cli --ldb (forked session) and --ldb-sync-mode over TLS: the
    debugger's blocking I/O goes through the TLS connection."""
    tls_port = tls_kv().tls_port
    script = tmp_path / "t.lua"
    script.write_text("local a = 5\nredis.call('set','q',a)\nreturn a\n")
    for mode, kept in (("--ldb", None), ("--ldb-sync-mode", "5")):
        p = subprocess.run([REDIS_CLI, "-p", str(tls_port), "--tls", "--cacert",
                            str(certs / "ca.crt"), mode, "--eval", str(script)],
                           input="s\np\nc\n", capture_output=True, text=True, timeout=20)
        out = p.stdout
        assert "* Stopped at 1, stop reason = step over" in out, (p.stdout, p.stderr)
        assert "<value> a = 5" in out and "(integer) 5" in out, out
        assert "Lua debugging session ended" in out, out
        assert cli(certs, tls_port, "GET", "q")[1] == (kept or "")
