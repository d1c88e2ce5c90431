"""HTTPS/1.1: brisk, and the apps on the handler API, serving TLS next to
plain HTTP, checked with real clients (curl, openssl s_client, Python's ssl).

Certificates come from the openssl command in a temporary directory: a good
self-signed one, a second one (for reloads), an expired one and a key that
belongs to neither. The server under test runs one worker, a plain listener
and an ssl one.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest

from apps_lib import AppProc, check_procs
from brisk_testlib import RawConn, free_port, req

OPENSSL = shutil.which("openssl")
CURL = shutil.which("curl")
pytestmark = pytest.mark.skipif(not OPENSSL or not CURL, reason="needs openssl and curl")

BIG = 6 * 1024 * 1024 + 12345  # several MiB, not a multiple of the 16 KiB chunk


def sh(*cmd, cwd=None, timeout=30):
    return subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, timeout=timeout)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    for name, cn in (("one", "brisk-one"), ("two", "brisk-two")):
        sh(OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
           "-out", f"{name}.pem", "-days", "30", "-subj", f"/CN={cn}",
           "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", cwd=d)
    # Expired: `openssl req` cannot date a certificate in the past, `openssl ca` can.
    (d / "ca").mkdir()
    (d / "ca" / "index.txt").write_text("")
    (d / "ca" / "serial").write_text("01\n")
    (d / "ca.cnf").write_text("[ca]\ndefault_ca = d\n[d]\ndatabase = ca/index.txt\n"
                              "new_certs_dir = ca\nserial = ca/serial\ndefault_md = sha256\n"
                              "policy = p\n[p]\ncommonName = supplied\n")
    sh(OPENSSL, "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", "expired.key",
       "-out", "expired.csr", "-subj", "/CN=brisk-expired", cwd=d)
    sh(OPENSSL, "ca", "-batch", "-config", "ca.cnf", "-selfsign", "-keyfile", "expired.key",
       "-in", "expired.csr", "-startdate", "20200101000000Z", "-enddate", "20200201000000Z",
       "-out", "expired.pem", cwd=d)
    return d


def der(pem_path: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem_path.read_text())


def client_ctx(alpn=("http/1.1",)):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if alpn:
        ctx.set_alpn_protocols(list(alpn))
    return ctx


def tls_conn(port, ctx=None, session=None, timeout=5.0, rcvbuf=None) -> RawConn:
    """A RawConn (the tests' HTTP client) over TLS."""
    c = RawConn("127.0.0.1", port, timeout=timeout, rcvbuf=rcvbuf)
    c.sock = (ctx or client_ctx()).wrap_socket(c.sock, server_hostname="localhost",
                                               session=session)
    return c


def get(c: RawConn, path, method="GET", headers=None, body=b""):
    c.send(req(method, path, headers=headers, body=body))
    return c.read_response(method=method)


class Tls:
    """A brisk with a plain listener (port) and an ssl one (tport)."""

    def __init__(self, srv, tport, cert, key):
        self.srv, self.port, self.tport, self.cert, self.key = srv, srv.port, tport, cert, key

    def url(self, path):
        return f"https://127.0.0.1:{self.tport}{path}"


@pytest.fixture
def start_tls(start_brisk, certs, tmp_path):
    """start_tls(extra="") -> Tls; the certificate files are copies in
    tmp_path (a test may replace them and reload)."""
    def _start(extra="", cert="one", key=None):
        c, k = tmp_path / "server.pem", tmp_path / "server.key"
        shutil.copy(certs / f"{cert}.pem", c)
        shutil.copy(certs / f"{key or cert}.key", k)
        port, tport = free_port(), free_port()
        config = (f"listen = 127.0.0.1:{port}\nlisten = 127.0.0.1:{tport} ssl\n"
                  "root = {root}\nworkers = 1\naccess_log = off\n"
                  f"ssl_certificate = {c}\nssl_certificate_key = {k}\n{extra}")
        srv = start_brisk(config=config, listens=[("127.0.0.1", port), ("127.0.0.1", tport)])
        return Tls(srv, tport, c, k)
    return _start


@pytest.fixture
def tls(start_tls):
    return start_tls()


def curl(*args, timeout=30):
    return subprocess.run([CURL, "-sS", "-k", "--http1.1", *args], capture_output=True,
                          timeout=timeout)


def s_client(port, *args, stdin=b"", timeout=15):
    p = subprocess.run([OPENSSL, "s_client", "-connect", f"127.0.0.1:{port}", *args],
                       input=stdin, capture_output=True, timeout=timeout)
    return p.returncode, (p.stdout + p.stderr).decode(errors="replace")


# ---------------------------------------------------------------- curl


def test_get_static_file_over_https_and_plain_beside_it(tls):
    r = curl("-i", tls.url("/hello.txt"))
    assert r.returncode == 0, r.stderr
    head, body = r.stdout.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200"), head
    assert body == b"Hello, brisk!\n"
    # the plain listener of the same server still speaks plain HTTP
    r = subprocess.run([CURL, "-sS", f"http://127.0.0.1:{tls.port}/hello.txt"],
                       capture_output=True, timeout=10)
    assert r.stdout == b"Hello, brisk!\n"


def test_keep_alive_reuses_one_tls_connection(tls):
    urls = [tls.url(f"/p/{i}.txt") for i in range(4)]
    r = curl("-v", *urls)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"".join(f"pipelined file number {i}\n".encode() * (i + 1)
                                for i in range(4))
    err = r.stderr.decode()
    assert err.count("Re-using existing connection") == 3, err
    assert err.count("SSL connection using") == 1, err


def test_large_file_matches_sha256(tls, tmp_path):
    data = os.urandom(BIG)
    (tls.srv.root / "big.bin").write_bytes(data)
    out = tmp_path / "got.bin"
    r = curl("-o", str(out), tls.url("/big.bin"), timeout=60)
    assert r.returncode == 0, r.stderr
    assert hashlib.sha256(out.read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()


def test_large_file_to_a_slow_reader_then_another_request(tls):
    """A small receive buffer makes the server's TLS writes stop half way
    (EAGAIN) and resume; the connection then serves another request."""
    data = os.urandom(BIG)
    (tls.srv.root / "big.bin").write_bytes(data)
    with tls_conn(tls.tport, rcvbuf=8192, timeout=30) as c:
        c.send(req("GET", "/big.bin"))
        r = c.read_response()
        assert r.status == 200 and len(r.body) == BIG
        assert hashlib.sha256(r.body).digest() == hashlib.sha256(data).digest()
        assert get(c, "/hello.txt").body == b"Hello, brisk!\n"


def test_head_and_404(tls):
    r = curl("-I", tls.url("/hello.txt"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(b"HTTP/1.1 200")
    assert b"\r\nContent-Length: 14\r\n" in r.stdout
    assert r.stdout.endswith(b"\r\n\r\n")  # no body
    r = curl("-o", "/dev/null", "-w", "%{http_code}", tls.url("/nope.txt"))
    assert r.stdout == b"404"


# ---------------------------------------------------------------- Python ssl


def test_pipelined_requests_over_tls(tls):
    with tls_conn(tls.tport) as c:
        assert c.sock.selected_alpn_protocol() == "http/1.1"
        c.send(b"".join(req("GET", f"/p/{i}.txt") for i in range(10)))
        for i in range(10):
            r = c.read_response()
            assert r.status == 200
            assert r.body == f"pipelined file number {i}\n".encode() * (i + 1)


def padded_get(path, size):
    r = req("GET", path, headers=[("X-Pad", "")])
    r = req("GET", path, headers=[("X-Pad", "p" * (size - len(r)))])
    assert len(r) == size
    return r


def test_bytes_left_inside_the_tls_session_are_served(tls):
    """A full 16 KiB record arrives while part of a request already sits in
    the input buffer: what does not fit stays decrypted inside the TLS
    session, where no socket event will announce it."""
    n, size, first = 8, 2173, 1000
    data = b"".join(padded_get("/hello.txt", size) for _ in range(n))
    assert len(data) == first + 16384
    with tls_conn(tls.tport) as c:
        c.sock.sendall(data[:first])
        time.sleep(0.3)  # the server reads the start of the first request
        c.sock.sendall(data[first:])  # exactly one TLS record
        for _ in range(n):
            r = c.read_response()
            assert r.status == 200 and r.body == b"Hello, brisk!\n"


def test_tls_1_0_and_1_1_refused_1_2_and_1_3_accepted(tls):
    for flag in ("-tls1", "-tls1_1"):
        # SECLEVEL=0 lets the client offer them: the refusal is the server's
        rc, out = s_client(tls.tport, flag, "-cipher", "DEFAULT@SECLEVEL=0")
        assert "no protocols available" not in out, out
        assert "alert protocol version" in out and "Cipher is (NONE)" in out, out
    for flag, name in (("-tls1_2", "TLSv1.2"), ("-tls1_3", "TLSv1.3")):
        rc, out = s_client(tls.tport, flag)
        assert f"New, {name}, Cipher is" in out, out


def test_tls_1_2_ciphers_are_forward_secret_aead(tls):
    rc, out = s_client(tls.tport, "-tls1_2", "-cipher", "AES128-SHA:AES256-SHA256")
    assert "Cipher is (NONE)" in out, out  # plain RSA key exchange, CBC: refused
    rc, out = s_client(tls.tport, "-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256")
    assert "Cipher is ECDHE-RSA-AES128-GCM-SHA256" in out, out


def test_tls_1_3_suite_is_the_servers_choice_chacha20_for_clients_that_ask(tls):
    # OpenSSL's client lists TLS_AES_256_GCM_SHA384 first: brisk's order wins
    rc, out = s_client(tls.tport, "-tls1_3")
    assert "New, TLSv1.3, Cipher is TLS_AES_128_GCM_SHA256" in out, out
    # a client without AES hardware puts ChaCha20 first, and gets it
    rc, out = s_client(tls.tport, "-tls1_3", "-ciphersuites",
                       "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256")
    assert "New, TLSv1.3, Cipher is TLS_CHACHA20_POLY1305_SHA256" in out, out
    rc, out = s_client(tls.tport, "-tls1_3", "-ciphersuites", "TLS_AES_256_GCM_SHA384")
    assert "New, TLSv1.3, Cipher is TLS_AES_256_GCM_SHA384" in out, out


def test_prefer_server_ciphers_off_takes_the_clients_order(start_tls):
    t = start_tls("ssl_prefer_server_ciphers = off\n")
    rc, out = s_client(t.tport, "-tls1_3")
    assert "New, TLSv1.3, Cipher is TLS_AES_256_GCM_SHA384" in out, out


def test_client_renegotiation_refused_server_lives(tls):
    stdin = b"R\n"  # s_client: renegotiate (TLS 1.2)
    rc, out = s_client(tls.tport, "-tls1_2", stdin=stdin)
    assert "RENEGOTIATING" in out and "no renegotiation" in out, out
    with tls_conn(tls.tport) as c:
        assert get(c, "/hello.txt").status == 200


def test_alpn_selects_h2_then_http_1_1(tls):
    rc, out = s_client(tls.tport, "-alpn", "h2,http/1.1")
    assert "ALPN protocol: h2" in out, out  # (HTTP/2 itself: test_h2.py)
    rc, out = s_client(tls.tport, "-alpn", "http/1.1")
    assert "ALPN protocol: http/1.1" in out, out
    rc, out = s_client(tls.tport, "-alpn", "spdy/3")
    assert "No ALPN negotiated" in out, out


@pytest.mark.parametrize("version", ["-tls1_2", "-tls1_3"])
def test_session_resumption_with_tickets(tls, tmp_path, version):
    sess = tmp_path / "sess.pem"
    request = b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    rc, out = s_client(tls.tport, version, "-ign_eof", "-sess_out", str(sess), stdin=request)
    assert "New, TLSv1." in out and "Hello, brisk!" in out, out
    rc, out = s_client(tls.tport, version, "-ign_eof", "-sess_in", str(sess), stdin=request)
    assert "Reused, TLSv1." in out and "Hello, brisk!" in out, out


def test_session_tickets_off(start_tls, tmp_path):
    t = start_tls("ssl_session_tickets = off\n")
    sess = tmp_path / "sess.pem"
    request = b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    rc, out = s_client(t.tport, "-tls1_2", "-ign_eof", "-sess_out", str(sess), stdin=request)
    assert "New, TLSv1.2" in out and "TLS session ticket:" not in out, out
    if sess.exists():  # (s_client writes none for a session it cannot resume)
        rc, out = s_client(t.tport, "-tls1_2", "-ign_eof", "-sess_in", str(sess), stdin=request)
        assert "New, TLSv1.2" in out and "Reused" not in out, out


def test_ssl_protocols_tls13_only(start_tls):
    t = start_tls("ssl_protocols = TLSv1.3\n")
    rc, out = s_client(t.tport, "-tls1_2")
    assert "Cipher is (NONE)" in out, out
    rc, out = s_client(t.tport, "-tls1_3")
    assert "New, TLSv1.3" in out, out


def test_ocsp_response_stapled_from_ssl_stapling_file(start_brisk, tmp_path):
    """A certificate from a test CA, an OCSP response for it made by
    `openssl ocsp` as the CA's responder, stapled from the file."""
    d = tmp_path / "ocsp"
    d.mkdir()
    (d / "index.txt").write_text("")
    (d / "serial").write_text("01\n")
    (d / "ca.cnf").write_text("[ca]\ndefault_ca = d\n[d]\ndatabase = index.txt\n"
                              "new_certs_dir = .\nserial = serial\ndefault_md = sha256\n"
                              "policy = p\ndefault_days = 30\n[p]\ncommonName = supplied\n")
    sh(OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
       "-out", "ca.pem", "-days", "30", "-subj", "/CN=brisk-test-ca", cwd=d)
    sh(OPENSSL, "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key",
       "-out", "srv.csr", "-subj", "/CN=localhost", cwd=d)
    sh(OPENSSL, "ca", "-batch", "-config", "ca.cnf", "-cert", "ca.pem", "-keyfile", "ca.key",
       "-in", "srv.csr", "-out", "srv.pem", cwd=d)
    sh(OPENSSL, "ocsp", "-issuer", "ca.pem", "-cert", "srv.pem", "-reqout", "req.der",
       "-no_nonce", cwd=d)
    sh(OPENSSL, "ocsp", "-index", "index.txt", "-rsigner", "ca.pem", "-rkey", "ca.key",
       "-CA", "ca.pem", "-reqin", "req.der", "-respout", "resp.der", "-ndays", "1", cwd=d)
    port, tport = free_port(), free_port()
    srv = start_brisk(config=f"listen = 127.0.0.1:{port}\nlisten = 127.0.0.1:{tport} ssl\n"
                      "root = {root}\nworkers = 1\n"
                      "ssl_certificate = ocsp/srv.pem\nssl_certificate_key = ocsp/srv.key\n"
                      "ssl_stapling_file = ocsp/resp.der\n",
                      listens=[("127.0.0.1", port), ("127.0.0.1", tport)])
    rc, out = s_client(tport, "-status")
    assert "OCSP Response Status: successful" in out and "Cert Status: good" in out, out
    assert srv.stderr().count("TLS certificate: /CN=localhost") == 1


# ---------------------------------------------------------------- bad clients


def test_silent_client_closed_by_header_timeout(start_tls):
    t = start_tls("client_header_timeout = 1s\n")
    with RawConn("127.0.0.1", t.tport, timeout=5) as raw:  # no ClientHello at all
        closed, _, took = raw.wait_closed(timeout=5)
        assert closed and took < 4, took
    with tls_conn(t.tport) as c:  # a handshake, then no request
        t0 = time.monotonic()
        c.sock.settimeout(5)
        try:
            assert c.sock.recv(100) == b""
        except (ConnectionResetError, ssl.SSLError):
            pass
        assert time.monotonic() - t0 < 4
    with tls_conn(t.tport) as c:
        assert get(c, "/hello.txt").status == 200


def handshake_only(port):
    """A TLS 1.3 connection that says nothing after its handshake; an EOF
    without close_notify raises (suppress_ragged_eofs off)."""
    ctx = client_ctx()
    ctx.maximum_version = ssl.TLSVersion.TLSv1_3
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    s = ctx.wrap_socket(sock, server_hostname="localhost", suppress_ragged_eofs=False)
    assert s.version() == "TLSv1.3"
    return s


def ticket_then_close_notify(s):
    """What the server sent after its handshake: its session ticket (held
    for a first response that never came), then close_notify."""
    assert s.recv(100) == b""  # close_notify (an abrupt EOF would raise)
    assert s.session is not None and s.session.has_ticket


def test_idle_connection_holding_its_ticket_does_not_hold_up_a_graceful_stop(start_tls):
    # the ticket waits for the first response; a client that never asks
    # is idle all the same: the stop sends it the ticket, then close_notify
    t = start_tls("client_header_timeout = 60s\nshutdown_timeout = 20s\n")
    s = handshake_only(t.tport)
    with tls_conn(t.tport) as c:  # (the handshake has been read by now)
        assert get(c, "/hello.txt").status == 200
    t0 = time.monotonic()
    assert t.srv.stop() == 0
    took = time.monotonic() - t0
    assert took < 5, f"the stop waited {took:.1f} s for an idle connection"
    ticket_then_close_notify(s)
    s.close()


def test_ticket_then_close_notify_at_the_header_timeout(start_tls):
    t = start_tls("client_header_timeout = 1s\n")
    s = handshake_only(t.tport)
    t0 = time.monotonic()
    ticket_then_close_notify(s)
    assert time.monotonic() - t0 < 4
    s.close()
    with tls_conn(t.tport) as c:
        assert get(c, "/hello.txt").status == 200


def test_plain_http_to_the_tls_port_is_closed_server_lives(tls):
    with RawConn("127.0.0.1", tls.tport, timeout=5) as raw:
        raw.send(req("GET", "/hello.txt"))
        closed, extra, took = raw.wait_closed(timeout=3)
        assert closed, "the connection stayed open"
        assert b"HTTP/1.1" not in extra and b"Hello" not in extra
    with RawConn("127.0.0.1", tls.tport, timeout=5) as raw:  # random bytes
        raw.send(os.urandom(3000))
        assert raw.wait_closed(timeout=3)[0]
    with tls_conn(tls.tport) as c:
        assert get(c, "/hello.txt").body == b"Hello, brisk!\n"


def test_client_gone_mid_handshake_and_mid_response(tls):
    data = os.urandom(2 * 1024 * 1024)
    (tls.srv.root / "big.bin").write_bytes(data)
    for _ in range(5):
        s = socket.create_connection(("127.0.0.1", tls.tport))
        s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a ClientHello, cut short
        s.close()
        with tls_conn(tls.tport, rcvbuf=4096) as c:
            c.send(req("GET", "/big.bin"))
            c.read_head()  # then go away with most of the body unread
    with tls_conn(tls.tport) as c:
        assert get(c, "/hello.txt").status == 200


# ---------------------------------------------------------------- start-up


def run_with(run_brisk, tmp_path, cert, key, extra=""):
    port = free_port()
    return run_brisk(["--listen", f"127.0.0.1:{port}", "ssl", "--ssl-cert", cert,
                      "--ssl-key", key, "--root", tmp_path, "--workers", "1", *extra])


def test_expired_certificate_stops_start_up(run_brisk, certs, tmp_path):
    p = run_with(run_brisk, tmp_path, certs / "expired.pem", certs / "expired.key")
    assert p.returncode != 0
    assert "expired.pem expired on 2020-02-01" in p.stderr, p.stderr


def test_mismatched_key_stops_start_up(run_brisk, certs, tmp_path):
    p = run_with(run_brisk, tmp_path, certs / "one.pem", certs / "two.key")
    assert p.returncode != 0
    assert "two.key does not match the certificate" in p.stderr, p.stderr


def test_missing_files_and_settings_stop_start_up(run_brisk, certs, tmp_path):
    p = run_with(run_brisk, tmp_path, tmp_path / "none.pem", certs / "one.key")
    assert p.returncode != 0 and "none.pem" in p.stderr, p.stderr
    port = free_port()
    p = run_brisk(["--listen", f"127.0.0.1:{port} ssl", "--root", tmp_path])
    assert p.returncode != 0
    assert "needs ssl_certificate and ssl_certificate_key" in p.stderr, p.stderr
    p = run_brisk(["--listen", f"127.0.0.1:{port} tls", "--root", tmp_path])
    assert p.returncode != 0 and 'unknown listen parameter "tls"' in p.stderr, p.stderr
    conf = tmp_path / "b.conf"
    conf.write_text(f"listen = 127.0.0.1:{port} ssl\nssl_certificate = {certs}/one.pem\n"
                    f"ssl_certificate_key = {certs}/one.key\nssl_protocols = TLSv1.1\n")
    p = run_brisk(["-t", "-c", conf])
    assert p.returncode != 0 and "TLSv1.1" in p.stderr, p.stderr


def test_encrypted_key_with_ssl_password_file(run_brisk, start_brisk, certs, tmp_path):
    """nginx's ssl_password_file: the passphrases of an encrypted key, a line
    each, tried in order; none that works, none at all, or no file stops
    the start with a clear message (never a prompt on a terminal)."""
    enc = tmp_path / "enc.key"
    sh(OPENSSL, "pkey", "-in", str(certs / "one.key"), "-aes256", "-passout", "pass:right one",
       "-out", str(enc))
    pw = tmp_path / "pw.txt"
    pw.write_text("wrong\r\nright one\n")
    port = free_port()
    conf = (f"listen = 127.0.0.1:{port} ssl\nssl_certificate = {certs}/one.pem\n"
            f"ssl_certificate_key = {enc}\nroot = {{root}}\nworkers = 1\naccess_log = off\n")
    srv = start_brisk(config=conf + f"ssl_password_file = {pw}\n", listens=[("127.0.0.1", port)])
    with tls_conn(port) as c:
        r = get(c, "/hello.txt")
        assert r.status == 200 and r.body == b"Hello, brisk!\n"
    srv.stop()
    cases = [("wrong\n", "tried 1 passphrase from"), ("\n", "no passphrase in it"),
             (None, "cannot load the private key")]
    for text, msg in cases:
        cfg = tmp_path / "b.conf"
        if text is None:
            cfg.write_text(conf.replace("{root}", str(tmp_path)))
        else:
            pw.write_text(text)
            cfg.write_text(conf.replace("{root}", str(tmp_path)) + f"ssl_password_file = {pw}\n")
        p = run_brisk(["-t", "-c", cfg])
        assert p.returncode != 0 and msg in p.stderr, (text, p.stderr)
    cfg.write_text(conf.replace("{root}", str(tmp_path)) +
                   f"ssl_password_file = {tmp_path}/none.txt\n")
    p = run_brisk(["-t", "-c", cfg])
    assert p.returncode != 0 and "none.txt" in p.stderr, p.stderr


def test_config_test_loads_the_certificate(run_brisk, certs, tmp_path):
    port = free_port()
    conf = tmp_path / "b.conf"
    conf.write_text(f"listen = 127.0.0.1:{port} ssl\nssl_certificate = {certs}/one.pem\n"
                    f"ssl_certificate_key = {certs}/one.key\n")
    p = run_brisk(["-t", "-c", conf])
    assert p.returncode == 0 and "test is successful" in p.stderr, p.stderr
    conf.write_text(f"listen = 127.0.0.1:{port} ssl\nssl_certificate = {certs}/expired.pem\n"
                    f"ssl_certificate_key = {certs}/expired.key\n")
    p = run_brisk(["-t", "-c", conf])
    assert p.returncode != 0 and "expired on" in p.stderr, p.stderr


# ---------------------------------------------------------------- reload


def wait_log(srv, text, count, timeout=10):
    deadline = time.monotonic() + timeout
    while srv.stderr().count(text) < count:
        assert time.monotonic() < deadline, f"no {text!r} in:\n{srv.stderr()}"
        time.sleep(0.05)


def test_sighup_loads_a_new_certificate_open_connections_go_on(tls, certs):
    cctx = client_ctx()
    old = tls_conn(tls.tport, ctx=cctx)
    assert get(old, "/hello.txt").status == 200  # (also receives the TLS 1.3 ticket)
    assert old.sock.getpeercert(binary_form=True) == der(certs / "one.pem")
    session = old.sock.session

    shutil.copy(certs / "two.pem", tls.cert)
    shutil.copy(certs / "two.key", tls.key)
    tls.srv.send_signal(signal.SIGHUP)
    wait_log(tls.srv, "configuration reloaded", 1)
    assert "TLS certificate: /CN=brisk-two" in tls.srv.stderr()

    with tls_conn(tls.tport) as c:
        assert c.sock.getpeercert(binary_form=True) == der(certs / "two.pem")
        assert get(c, "/hello.txt").status == 200
    # the keep-alive connection of before serves on, with the old certificate
    for _ in range(3):
        assert get(old, "/hello.txt").body == b"Hello, brisk!\n"
    old.close()
    # a ticket issued before the reload still resumes (the ticket keys are kept)
    with tls_conn(tls.tport, ctx=cctx, session=session) as c:
        assert get(c, "/hello.txt").status == 200
        assert c.sock.session_reused


def test_sighup_with_a_bad_certificate_keeps_the_running_one(tls, certs):
    shutil.copy(certs / "expired.pem", tls.cert)
    shutil.copy(certs / "expired.key", tls.key)
    tls.srv.send_signal(signal.SIGHUP)
    wait_log(tls.srv, "reload failed", 1)
    assert "expired on" in tls.srv.stderr()
    with tls_conn(tls.tport) as c:
        assert c.sock.getpeercert(binary_form=True) == der(certs / "one.pem")
        assert get(c, "/hello.txt").status == 200


# ---------------------------------------------------------------- the apps


@pytest.fixture
def apps(tmp_path):
    procs = []
    yield procs
    check_procs(procs)


def ssl_args(certs, tport):
    return ["--listen", f"127.0.0.1:{tport}", "ssl", "--ssl-cert", certs / "one.pem",
            "--ssl-key", certs / "one.key"]


def test_hello_and_echo_serve_https_unchanged(apps, certs, tmp_path):
    for name, path, want in (("brisk-hello", "/", b"Hello World"),
                             ("brisk-echo", "/?value=tls", b"tls")):
        tport = free_port()
        p = AppProc(name, tmp_path, args=ssl_args(certs, tport))
        apps.append(p)
        p.start(wait_for=[("127.0.0.1", p.port), ("127.0.0.1", tport)])
        r = curl(f"https://127.0.0.1:{tport}{path}")
        assert r.returncode == 0 and r.stdout == want, r.stderr
        assert "(ssl)" in p.stderr()


def test_post_bodies_to_the_api_over_https(apps, certs, tmp_path):
    """api_test's /body echoes the request body; brisk_listen("ADDR ssl")."""
    tport = free_port()
    p = AppProc("api_test", tmp_path, env={"API_TEST_LISTEN": f"127.0.0.1:{tport} ssl"},
                args=["--ssl-cert", certs / "one.pem", "--ssl-key", certs / "one.key"],
                listen=False)
    apps.append(p)
    p.start(wait_for=[("127.0.0.1", tport)])
    body = os.urandom(300 * 1024)
    with tls_conn(tport) as c:
        r = get(c, "/body", method="POST", body=body,
                headers=[("Content-Length", str(len(body)))])
        assert r.status == 200 and r.body == body
        r = get(c, "/body", method="POST", body=b"short",
                headers=[("Content-Length", "5")])
        assert r.body == b"short"
    bodyfile = tmp_path / "post.bin"
    bodyfile.write_bytes(b"curl posted this")
    r = curl("--data-binary", f"@{bodyfile}", f"https://127.0.0.1:{tport}/body")
    assert r.stdout == b"curl posted this", r.stderr


def test_foods_serves_https(apps, certs, tmp_path):
    tport = free_port()
    p = AppProc("brisk-foods", tmp_path,
                args=["--db", f"sqlite:{tmp_path}/foods.db", *ssl_args(certs, tport)])
    apps.append(p)
    p.start(wait_for=[("127.0.0.1", tport)])
    r = curl("-H", "Content-Type: application/json", "--data-binary",
             '{"name": "tls apple", "category_id": 1, "kcal": 52, "protein": 0.3, '
             '"carbs": 14, "fat": 0.2}', f"https://127.0.0.1:{tport}/api/foods")
    assert r.returncode == 0 and b"tls apple" in r.stdout, (r.stdout, r.stderr)
    r = curl(f"https://127.0.0.1:{tport}/api/foods?q=tls")
    assert b"tls apple" in r.stdout, r.stdout
