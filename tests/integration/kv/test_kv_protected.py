"""Protected mode: with no password set and protected-mode yes (the
default), a client that connects from anything but the loopback interface
gets Redis's DENIED error and is disconnected; loopback clients, a password
or CONFIG SET protected-mode no let it in.

The test needs a non-loopback address of this machine to connect from: the
server binds 0.0.0.0 and the client binds its socket to that address.
Without one the test is skipped (the decision itself is also covered by the
unit test tests/unit/test_kv_protected.c).
"""
from __future__ import annotations

import ipaddress
import shutil
import socket
import subprocess
import time

import pytest

from kvlib import KV_BIN, free_port

DENIED = (
    "DENIED Redis is running in protected mode because protected mode is enabled and no "
    "password is set for the default user. In this mode connections are only accepted from "
    "the loopback interface. If you want to connect from external computers to Redis you may "
    "adopt one of the following solutions: 1) Just disable protected mode sending the command "
    "'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from "
    "the same host the server is running, however MAKE SURE Redis is not publicly accessible "
    "from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) "
    "Alternatively you can just disable the protected mode by editing the Redis configuration "
    "file, and setting the protected mode option to 'no', and then restarting the server. 3) "
    "If you started the server manually just for testing, restart it with the "
    "'--protected-mode no' option. 4) Setup a an authentication password for the default "
    "user. NOTE: You only need to do one of the above things in order for the server to start "
    "accepting connections from the outside."
)


def non_loopback_ipv4() -> str | None:
    """An IPv4 address of this machine outside 127/8 that a socket can bind."""
    candidates = []
    try:
        out = subprocess.run(["ip", "-o", "-4", "addr", "show", "up"], capture_output=True,
                             text=True, timeout=5).stdout
        for line in out.splitlines():
            parts = line.split()
            if "inet" in parts:
                candidates.append(parts[parts.index("inet") + 1].split("/")[0])
    except (OSError, subprocess.SubprocessError):
        pass
    try:  # the source address of the default route (no packet is sent)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))
            candidates.append(s.getsockname()[0])
    except OSError:
        pass
    for ip in candidates:
        if ipaddress.ip_address(ip).is_loopback:
            continue
        try:
            with socket.socket() as s:
                s.bind((ip, 0))
            return ip
        except OSError:
            continue
    return None


OUTSIDE = non_loopback_ipv4()
needs_outside = pytest.mark.skipif(
    OUTSIDE is None, reason="this machine has no non-loopback IPv4 address to connect from")


def talk(src: str, port: int, data: bytes) -> tuple[bytes, bool]:
    """Connects from src to src:port, sends data; returns what came back and
    whether the server closed the connection."""
    with socket.socket() as s:
        s.bind((src, 0))
        s.settimeout(5)
        s.connect((src, port))
        s.sendall(data)
        got, closed = b"", False
        s.settimeout(0.5)
        while True:
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                closed = True
                break
            if not b:
                closed = True
                break
            got += b
        return got, closed


@needs_outside
def test_outside_client_is_denied_by_default(kv_factory):
    kv = kv_factory("--bind", "0.0.0.0")
    got, closed = talk(OUTSIDE, kv.port, b"PING\r\n")
    assert got == b"-" + DENIED.encode() + b"\r\n"
    assert closed
    c = kv.client(decode_responses=True)  # loopback still works
    assert c.ping() is True
    assert c.config_get("protected-mode") == {"protected-mode": "yes"}
    assert c.info("stats")["rejected_connections"] == 1
    # the refusal comes at once, before any command is read
    got, closed = talk(OUTSIDE, kv.port, b"")
    assert got.startswith(b"-DENIED ") and closed
    c.close()


@needs_outside
def test_config_set_protected_mode_no_lets_outside_in(kv_factory):
    kv = kv_factory("--bind", "0.0.0.0")
    c = kv.client(decode_responses=True)
    assert c.config_set("protected-mode", "no") is True
    assert c.config_get("protected-mode") == {"protected-mode": "no"}
    assert talk(OUTSIDE, kv.port, b"PING\r\n") == (b"+PONG\r\n", False)
    assert c.config_set("protected-mode", "yes") is True
    got, closed = talk(OUTSIDE, kv.port, b"PING\r\n")
    assert got.startswith(b"-DENIED ") and closed
    c.close()


@needs_outside
def test_a_password_lifts_protected_mode(kv_factory):
    kv = kv_factory("--bind", "0.0.0.0", "--requirepass", "pw")
    got, closed = talk(OUTSIDE, kv.port, b"PING\r\nAUTH pw\r\nPING\r\n")
    assert got == b"-NOAUTH Authentication required.\r\n+OK\r\n+PONG\r\n"
    assert not closed
    # clearing the password at run time brings the refusal back
    c = kv.client(password="pw", decode_responses=True)
    assert c.config_set("requirepass", "") is True
    got, closed = talk(OUTSIDE, kv.port, b"PING\r\n")
    assert got.startswith(b"-DENIED ") and closed
    c.close()


@needs_outside
def test_command_line_and_config_file(kv_factory, tmp_path):
    kv = kv_factory("--bind", "0.0.0.0", "--protected-mode", "no")
    assert talk(OUTSIDE, kv.port, b"PING\r\n") == (b"+PONG\r\n", False)
    # redis.conf syntax; the file comes first on the command line
    kv2 = kv_factory(start=False)
    conf = tmp_path / "kv.conf"
    conf.write_text(f"port {kv2.port}\ndir {tmp_path}\nbind 0.0.0.0\nprotected-mode no\n")
    kv2.log = open(kv2.log_path, "ab")
    kv2.proc = subprocess.Popen([KV_BIN, str(conf)], stdout=kv2.log, stderr=subprocess.STDOUT)
    kv2.wait_ready()
    assert talk(OUTSIDE, kv2.port, b"PING\r\n") == (b"+PONG\r\n", False)


@needs_outside
@pytest.mark.skipif(not shutil.which("redis-server"), reason="redis-server is not installed")
def test_denied_text_matches_redis(tmp_path):
    """The same refusal from the real redis-server, byte for byte."""
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "0.0.0.0",
                             "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        got, closed = talk(OUTSIDE, port, b"PING\r\n")
        if got.startswith(b"-DENIED"):
            assert got == b"-" + DENIED.encode() + b"\r\n"
        else:
            pytest.skip(f"this redis-server version answers differently: {got[:60]!r}")
    finally:
        proc.terminate()
        proc.wait(10)
