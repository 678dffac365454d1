"""PyMySQL connections that share one TLS context per process.

PyMySQL 1.2 connects in TLS PREFERRED mode when given no TLS options (TLS when the server offers
it, plain otherwise), and builds that mode's ``SSLContext`` for every connection, loading the
system's CA certificates each time: 30-70 ms of CPU a connection on this machine. A binlog read
opens two connections (the replication stream and its control connection), so a CDC task
following a busy log paid it several times a second, and the JDBC source once per split read.
The context is the same each time (no CA, no certificate check: PyMySQL's own PREFERRED
settings), and an ``SSLContext`` may serve many connections and threads, so it is built once.

Connections given TLS options of their own (``ssl``, ``ssl_ca``, …) build theirs as before.
PyMySQL is imported when a connection is first made: config validation imports the connectors
that use this module.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import ssl


@cache
def preferred_tls_context() -> ssl.SSLContext:
    """PyMySQL's PREFERRED-mode TLS context (no CA, no certificate check), built once per process;
    also given to the JDBC source's asyncmy reads (connectors.jdbc.read), which take it as PyMySQL
    does: TLS when the server offers it."""
    from pymysql.connections import Connection

    return Connection._create_ssl_ctx(Connection.__new__(Connection), {})  # uses nothing of the instance


@cache
def connection_class() -> type[Any]:
    """PyMySQL's ``Connection`` whose PREFERRED-mode TLS context is built once per process (usable
    wherever PyMySQL takes a connection factory, as ``pymysqlreplication``'s ``pymysql_wrapper``)."""
    from pymysql.connections import Connection

    class SharedTlsConnection(Connection):
        def _create_ssl_ctx(self, sslp: Any) -> ssl.SSLContext:
            if sslp != {}:  # TLS options of its own
                return super()._create_ssl_ctx(sslp)
            return preferred_tls_context()

    return SharedTlsConnection


def connect(**settings: Any) -> Any:
    """``pymysql.connect(**settings)``, sharing the PREFERRED-mode TLS context."""
    return connection_class()(**settings)
