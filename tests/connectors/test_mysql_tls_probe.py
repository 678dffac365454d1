"""``read.offers_tls``: the JDBC source's asyncmy reads take TLS when the MySQL server's greeting
offers it (PyMySQL's PREFERRED mode), found from the greeting's capability flags."""

from __future__ import annotations

import socket
import threading

import pytest

from sluice.connectors.jdbc.read import offers_tls


def _greeting(flags: int) -> bytes:
    """A protocol-10 greeting as MariaDB sends it, up to and past the lower capability flags."""
    payload = (
        b"\x0a" + b"11.8.3-MariaDB-0+deb13u1\x00" + (42).to_bytes(4, "little") + b"abcdefgh" + b"\x00"
        + flags.to_bytes(2, "little") + b"\x2d\x02\x00" + b"\x00" * 20
    )  # fmt: skip
    return len(payload).to_bytes(3, "little") + b"\x00" + payload


def _serving(packet: bytes) -> tuple[str, int]:
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        with server:
            conn, _ = server.accept()
            with conn:
                for i in range(0, len(packet), 7):  # in pieces, as a network may deliver it
                    conn.sendall(packet[i : i + 7])

    threading.Thread(target=serve, daemon=True).start()
    host, port = server.getsockname()[:2]
    return host, port


@pytest.mark.parametrize(
    ("flags", "expected"),
    [(0xF7FE, False), (0xFFFE, True), (0x0800, True), (0x0000, False)],
    ids=["no CLIENT_SSL", "all flags", "only CLIENT_SSL", "none"],
)
def test_the_greeting_says_whether_the_server_offers_tls(flags: int, expected: bool) -> None:
    assert offers_tls(*_serving(_greeting(flags))) is expected


def test_an_error_greeting_is_a_connection_error_with_the_servers_words() -> None:
    message = b"Too many connections"
    payload = b"\xff" + (1040).to_bytes(2, "little") + message
    packet = len(payload).to_bytes(3, "little") + b"\x00" + payload
    with pytest.raises(ConnectionError, match="Too many connections"):
        offers_tls(*_serving(packet))
