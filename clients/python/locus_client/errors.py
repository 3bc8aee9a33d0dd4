"""The exceptions of the Locus client.

Each one says what went wrong and where (server id and address, file and
line) so that a user can act on it without reading the source:

- ``LocusError``: the server answered with an error reply (``code``,
  ``code_name`` as in docs/protocol.md, the server's ``message``).
- ``LocusUnavailable`` (a ``ConnectionError``): a server could not be reached
  or dropped the connection; ``LocusTimeout`` when it did not answer in time.
- ``AuthError``: the handshake was refused, or the server failed to prove it
  knows the cluster secret.
- ``ProtocolError``: bytes that are not a valid frame (or handshake); the
  connection they came on is closed.
- ``ConfigError`` (a ``ValueError``): the cluster file or the addresses do
  not describe the cluster the servers say they are.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """Bytes that do not decode as a frame of docs/protocol.md.

    ``code`` is the error code a server would answer with (MALFORMED,
    TOO_LARGE, UNKNOWN_OP, INVALID), so a server-side user (the tests'
    fake server) can reply as a real server would.
    """

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


class LocusError(Exception):
    """An error reply from a server."""

    def __init__(self, code: int, code_name: str, message: str, server: int | None = None):
        super().__init__(f"{code_name}: {message}")
        self.code = code
        self.code_name = code_name
        self.message = message
        self.server = server


class LocusUnavailable(ConnectionError):
    """A server could not be reached, or the connection to it broke."""

    def __init__(self, server: int | None, address: str, reason: str):
        who = f"server {server} ({address})" if server is not None else address
        super().__init__(f"{who}: {reason}")
        self.server = server
        self.address = address
        self.reason = reason


class LocusTimeout(LocusUnavailable, TimeoutError):
    """A server did not answer within the request's deadline (plus a grace second)."""


class AuthError(Exception):
    """The handshake failed: refused by the server, or the server's proof is wrong."""

    def __init__(self, message: str, reason: str | None = None):
        super().__init__(message)
        self.reason = reason


class ConfigError(ValueError):
    """The cluster description does not match the cluster (or does not parse)."""
