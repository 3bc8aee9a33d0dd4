"""Python client of Locus, a distributed in-memory graph store.

Pure Python, standard library only. See ``Client`` for the API and
docs/protocol.md in the Locus repository for the wire protocol.
"""

from .client import CLIENT_NAME, ROUTE_RETRIES_MAX, Client, KhopResult, Location, Routing
from .errors import AuthError, ConfigError, LocusError, LocusTimeout, LocusUnavailable, ProtocolError
from .slots import SlotTable

__version__ = "0.1.0"

__all__ = [
    "CLIENT_NAME",
    "AuthError",
    "Client",
    "ConfigError",
    "KhopResult",
    "Location",
    "LocusError",
    "LocusTimeout",
    "LocusUnavailable",
    "ProtocolError",
    "ROUTE_RETRIES_MAX",
    "Routing",
    "SlotTable",
    "__version__",
]
