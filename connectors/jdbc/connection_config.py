"""The connection keys every JDBC-style connector shares (Kafka Connect JDBC's names).

One declaration for source and sink, so both treat them alike: ``connection.url`` is secret too,
because users put ``?password=`` or ``user:password@`` in it and it must be masked wherever the
password would be.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sluice.connectors.config import ConfigField
from sluice.connectors.jdbc.urls import engine_url

URL_DOC = "jdbc:mysql://host:3306/db, jdbc:mariadb://…, jdbc:postgresql://host:5432/db or a SQLAlchemy URL"


def url_problem(value: Any) -> str | None:
    """Why ``value`` is not a URL Sluice can connect with (never echoing it), or None."""
    try:
        engine_url(str(value))
    except ValueError as exc:
        return str(exc)
    return None


def connection_fields(url_check: Callable[[Any], str | None] = url_problem) -> tuple[ConfigField, ...]:
    """``connection.url`` / ``.user`` / ``.password``; ``url_check`` narrows the accepted databases."""
    return (
        ConfigField("connection.url", str, doc=URL_DOC, secret=True, validator=url_check),
        ConfigField("connection.user", str, "", doc="database user (wins over the URL's)"),
        ConfigField("connection.password", str, "", doc="database password", secret=True),
    )
