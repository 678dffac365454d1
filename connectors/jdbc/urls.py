"""``connection.url`` as users write it, turned into a SQLAlchemy URL and a dialect.

Kafka Connect's and RocketMQ Connect's JDBC users keep JDBC URLs in their files
(``jdbc:mysql://host:3306/db``, ``jdbc:mariadb://…``, ``jdbc:postgresql://host/db?user=u&password=p``);
Sluice also takes SQLAlchemy URLs. Credentials may come in the URL or from ``connection.user`` /
``connection.password`` (those win). Errors never echo the URL: it may hold a password.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final
from urllib.parse import parse_qsl, urlsplit

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError


class Dialect(StrEnum):
    MYSQL = "mysql"  # MySQL and MariaDB
    POSTGRESQL = "postgresql"


#: The Python driver Sluice uses per dialect (PyMySQL: pure Python, LOAD DATA LOCAL; psycopg 3: COPY).
DRIVERS: Final = {Dialect.MYSQL: "mysql+pymysql", Dialect.POSTGRESQL: "postgresql+psycopg"}
_SCHEMES: Final = {
    "mysql": Dialect.MYSQL,
    "mariadb": Dialect.MYSQL,
    "postgresql": Dialect.POSTGRESQL,
    "postgres": Dialect.POSTGRESQL,
}
_CREDENTIAL_PARAMS: Final = ("user", "password")


def _dialect_of_scheme(scheme: str) -> Dialect:
    base = scheme.split("+", 1)[0].lower()
    if base not in _SCHEMES:
        raise ValueError(
            f"unsupported database {base!r} in connection.url (supported: MySQL/MariaDB and PostgreSQL, "
            "e.g. jdbc:mysql://host:3306/db or postgresql://host:5432/db)"
        )
    return _SCHEMES[base]


def engine_url(raw: str, user: str | None = None, password: str | None = None) -> URL:
    """The SQLAlchemy URL (Sluice's driver for the dialect) for a JDBC or SQLAlchemy ``raw`` URL.

    JDBC query parameters ``user`` and ``password`` become the URL's credentials; other JDBC
    parameters (driver tuning such as ``useSSL``) are dropped, since they mean nothing to the
    Python drivers. Raises ValueError without the URL's text.
    """
    text = raw.strip()
    jdbc = text.lower().startswith("jdbc:")
    if jdbc:
        text = text[len("jdbc:") :]
    try:
        parts = urlsplit(text)
    except ValueError:
        raise ValueError("connection.url is not a URL") from None
    if not parts.scheme or not parts.netloc:
        raise ValueError("connection.url must look like jdbc:mysql://host:port/db or postgresql://host/db")
    dialect = _dialect_of_scheme(parts.scheme)
    try:
        url = make_url(text if not jdbc else text.split("?", 1)[0])
    except (ArgumentError, ValueError):
        raise ValueError("connection.url is not a valid database URL") from None
    url = url.set(drivername=DRIVERS[dialect])
    if jdbc:
        params = dict(parse_qsl(parts.query))
        url = url.set(
            username=params.get("user", url.username), password=params.get("password", url.password)
        )
    if user:
        url = url.set(username=user)
    if password:
        url = url.set(password=password)
    return url


def dialect_of(url: URL | str) -> Dialect:
    """The dialect of a SQLAlchemy or JDBC URL."""
    if isinstance(url, str):
        return _dialect_of_scheme(urlsplit(url.strip().removeprefix("jdbc:")).scheme)
    return _dialect_of_scheme(url.drivername)
