"""The cluster file, as far as a client needs it::

    [cluster]
    secret = "..."          # or LOCUS_SECRET in the environment, which wins

    [[server]]
    id = 0
    client = "127.0.0.1:7400"   # the server's client listener

Other keys are the servers' business and are ignored here. Server ids must
be 0..n-1, each exactly once: a client routes vertex ``v`` to server
``v % n``, so a gap or a duplicate would send requests to the wrong machine.
"""

from __future__ import annotations

import os
from typing import Mapping, Sequence

from .errors import ConfigError

try:
    import tomllib
except ImportError:  # Python 3.10: the tomli backport, if installed
    try:
        import tomli as tomllib  # type: ignore[no-redef]
    except ImportError:
        tomllib = None  # type: ignore[assignment]

SECRET_ENV = "LOCUS_SECRET"
#: Servers a cluster may have (machine ids are one byte on the wire).
SERVERS_MAX = 256


def parse_address(text: str, where: str = "address") -> tuple[str, int]:
    """``host:port`` (or ``[v6]:port``) as (host, port); ``ConfigError`` naming ``where``."""
    if not isinstance(text, str) or ":" not in text:
        raise ConfigError(f"{where}: {text!r} is not host:port")
    host, _, port_text = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or not port_text.isascii() or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigError(f"{where}: {text!r} is not host:port with a port in 1..65535")
    return host, int(port_text)


def normalize_addresses(addresses: Sequence[str] | Mapping[int, str], source: str = "addresses") -> list[str]:
    """Addresses indexed by server id, checked: ids 0..n-1, each once, each host:port."""
    if isinstance(addresses, Mapping):
        items = list(addresses.items())
    elif isinstance(addresses, (str, bytes)):
        raise ConfigError(f"{source}: expected a list or dict of host:port addresses, not one string")
    else:
        items = list(enumerate(addresses))
    return _check_ids(items, source)


def _check_ids(items: list[tuple[object, object]], source: str) -> list[str]:
    n = len(items)
    if n == 0:
        raise ConfigError(f"{source}: no servers")
    if n > SERVERS_MAX:
        raise ConfigError(f"{source}: {n} servers, past the limit of {SERVERS_MAX}")
    by_id: dict[int, str] = {}
    for sid, addr in items:
        if isinstance(sid, bool) or not isinstance(sid, int) or not 0 <= sid < n:
            raise ConfigError(f"{source}: server id {sid!r} is not in 0..{n - 1} (ids must be 0..n-1 for {n} servers)")
        if sid in by_id:
            raise ConfigError(f"{source}: server id {sid} appears more than once")
        parse_address(addr, f"{source}: server {sid}")  # type: ignore[arg-type]
        by_id[sid] = addr  # type: ignore[assignment]
    # n distinct ids in 0..n-1: every id is present.
    return [by_id[i] for i in range(n)]


def read_cluster_file(path: str | os.PathLike, secret: str | None = None) -> tuple[list[str], str]:
    """(client addresses by server id, secret) from a cluster file.

    The secret is ``secret`` if given, else ``LOCUS_SECRET`` if set and
    non-empty, else ``[cluster] secret``.
    """
    name = os.fspath(path)
    if tomllib is None:
        raise ConfigError(f"{name}: reading a cluster file needs Python 3.11 (tomllib) or the tomli package")
    try:
        with open(name, "rb") as f:
            doc = tomllib.load(f)
    except OSError as e:
        raise ConfigError(f"{name}: cannot read the cluster file: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{name}: not valid TOML: {e}") from None
    servers = doc.get("server")
    if not isinstance(servers, list) or not servers:
        raise ConfigError(f"{name}: no [[server]] tables (each needs id = N and client = \"host:port\")")
    items: list[tuple[object, object]] = []
    for i, s in enumerate(servers, 1):
        if not isinstance(s, dict):
            raise ConfigError(f"{name}: server entry {i} is not a table")
        if "id" not in s or "client" not in s:
            raise ConfigError(f"{name}: [[server]] number {i} needs both id = N and client = \"host:port\"")
        if not isinstance(s["client"], str):
            raise ConfigError(f"{name}: server {s['id']!r}: client must be a \"host:port\" string")
        items.append((s["id"], s["client"]))
    addresses = _check_ids(items, name)
    if secret is None:
        secret = os.environ.get(SECRET_ENV) or None
    if secret is None:
        cluster = doc.get("cluster")
        if isinstance(cluster, dict) and isinstance(cluster.get("secret"), str):
            secret = cluster["secret"]
    if not secret:
        raise ConfigError(f"{name}: no cluster secret: set [cluster] secret in the file or {SECRET_ENV}")
    return addresses, secret
