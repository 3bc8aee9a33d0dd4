"""The client side of the Locus handshake (docs/protocol.md, section 1).

::

    client                                   server
      |<---- "LOCUSAU1" ++ ns (32 bytes) --------|   1. challenge
      |----- nc (32) ++ mac_c (32) ------------->|   2. proof
      |<---- 0x00 ++ mac_s (32) -----------------|   3. accepted
      |<---- 0x01 ++ u16 len ++ reason ----------|      or refused (then closed)

    mac_c = HMAC-SHA256(secret, "locus-auth-v1 client" ++ [kind] ++ ns ++ nc)
    mac_s = HMAC-SHA256(secret, "locus-auth-v1 server" ++ [kind] ++ ns ++ nc)

Both nonces are fresh, so a recorded exchange cannot be replayed; checking
``mac_s`` means a client never sends data to a server that does not know the
secret (an impostor on the port).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import socket
import struct

from . import _io
from .errors import AuthError, ProtocolError

AUTH_MAGIC = b"LOCUSAU1"
NONCE_BYTES = 32
MAC_BYTES = 32
#: Handshake kinds: the fabric listener, the client listener, the coordinator's control listener.
KIND_FABRIC = 1
KIND_CLIENT = 2
KIND_CONTROL = 3
STATUS_ACCEPTED = 0x00
STATUS_REFUSED = 0x01


def _mac(secret: bytes, role: bytes, kind: int, ns: bytes, nc: bytes) -> bytes:
    return hmac.new(secret, b"locus-auth-v1 " + role + bytes([kind]) + ns + nc, hashlib.sha256).digest()


def client_mac(secret: bytes, kind: int, ns: bytes, nc: bytes) -> bytes:
    """The client's proof that it knows ``secret``."""
    return _mac(secret, b"client", kind, ns, nc)


def server_mac(secret: bytes, kind: int, ns: bytes, nc: bytes) -> bytes:
    """The server's proof that it knows ``secret``."""
    return _mac(secret, b"server", kind, ns, nc)


def secret_bytes(secret: str | bytes) -> bytes:
    """The secret as the handshake uses it: the UTF-8 bytes of the configured string."""
    raw = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)
    if not raw:
        raise ValueError("the cluster secret is empty; set [cluster] secret or LOCUS_SECRET")
    return raw


def handshake(sock: socket.socket, secret: str | bytes, end: float, kind: int = KIND_CLIENT, peer: str = "server") -> None:
    """Runs the client side of the handshake on a connected socket before ``end``
    (a ``time.monotonic()`` instant).

    Raises ``AuthError`` if the server refuses (with its reason) or cannot prove
    it knows the secret, ``ProtocolError`` if the peer does not speak the
    handshake at all, ``TimeoutError``/``ConnectionError`` if it goes silent or
    closes. ``peer`` names the server in messages.
    """
    key = secret_bytes(secret)
    magic = _io.recv_exact(sock, len(AUTH_MAGIC), end)
    if magic != AUTH_MAGIC:
        raise ProtocolError(
            f"{peer} did not open with the Locus handshake (got {magic!r}, expected {AUTH_MAGIC!r}): "
            "is this the server's client port?"
        )
    ns = _io.recv_exact(sock, NONCE_BYTES, end)
    nc = os.urandom(NONCE_BYTES)
    _io.send_all(sock, nc + client_mac(key, kind, ns, nc), end)
    status = _io.recv_exact(sock, 1, end)[0]
    if status == STATUS_ACCEPTED:
        mac_s = _io.recv_exact(sock, MAC_BYTES, end)
        if not hmac.compare_digest(mac_s, server_mac(key, kind, ns, nc)):
            raise AuthError(
                f"{peer} accepted the handshake but its proof is wrong: it does not know the cluster "
                "secret (an impostor, or another cluster on this port); refusing to talk to it"
            )
        return
    if status == STATUS_REFUSED:
        (n,) = struct.unpack("<H", _io.recv_exact(sock, 2, end))
        # A u16 length bounds the read at 64 KiB; the reason is only shown, so
        # undecodable bytes are replaced rather than refused.
        reason = _io.recv_exact(sock, n, end).decode("utf-8", "replace")
        raise AuthError(f"{peer} refused the handshake: {reason}", reason)
    raise ProtocolError(f"{peer} sent handshake status 0x{status:02x}, expected 0x00 (accepted) or 0x01 (refused)")
