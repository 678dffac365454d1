"""The OpenSearch sink's configuration: Confluent's Elasticsearch sink keys, RocketMQ Connect's host
and port keys, and the checks between them.

``connection.url`` is secret (users put ``user:password@`` in URLs, as for JDBC), and so is
``connection.password``: both are masked in status, logs and errors. Messages name a service by
:func:`shown_url`, which drops any user information.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from sluice.connectors.config import ConfigDef, ConfigField, FieldError, at_least, split_list

WRITE_METHODS: Final = ("insert", "upsert")
NULL_BEHAVIORS: Final = ("ignore", "delete", "fail")
#: Characters OpenSearch refuses in an index name (besides upper case, and a leading ``-_+``).
_BAD_INDEX_CHARS: Final = re.compile(r'[\\/*?"<>| ,#:]')


def _lower(value: Any) -> Any:
    """Confluent spells the choices in upper case (``UPSERT``, ``DELETE``); both spellings work."""
    return value.strip().lower() if isinstance(value, str) else value


def _implied_url(raw: Mapping[str, Any]) -> str:
    """RocketMQ Connect's Elasticsearch sink names the service by ``elasticsearchHost`` and
    ``elasticsearchPort``; they stand for ``connection.url`` when it is not given."""
    host = str(raw.get("elasticsearchHost") or "").strip()
    if not host:
        return ""
    port = str(raw.get("elasticsearchPort") or "9200").strip()
    return host if "://" in host else f"http://{host}:{port}"


def url_problem(value: Any) -> str | None:
    """Why ``value`` is not a comma list of http(s) URLs (never echoing it), or None."""
    urls = split_list(str(value))
    if not urls:
        return None  # checked with the RocketMQ Connect keys (connector_errors)
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return "expected http(s)://host:port URLs, comma-separated"
        try:
            parts.port  # noqa: B018 - raises on a port that is not a number
        except ValueError:
            return "a URL's port is not a number"
    return None


def index_problem(name: str) -> str | None:
    """Why OpenSearch would refuse ``name`` as an index name, or None."""
    if not name or name in (".", ".."):
        return "is empty"
    if name != name.lower():
        return "has upper-case letters"
    if name[0] in "-_+":
        return "starts with '-', '_' or '+'"
    if _BAD_INDEX_CHARS.search(name):
        return 'has a character OpenSearch refuses (\\ / * ? " < > | space , # :)'
    if len(name.encode()) > 255:
        return "is longer than 255 bytes"
    return None


def index_map_problem(value: Any) -> str | None:
    pairs = value if isinstance(value, list) else split_list(str(value))
    for pair in pairs:
        topic, sep, index = pair.partition(":")
        if not sep or not topic.strip() or not index.strip():
            return f"expected topic:index pairs, got {pair!r}"
        problem = index_problem(index.strip())
        if problem:
            return f"index {index.strip()!r} {problem}"
    return None


FIELDS: Final = ConfigDef(
    (
        ConfigField(
            "connection.url",
            str,
            "",
            doc="OpenSearch/Elasticsearch HTTP URL, or a comma list of them (tried in turn)",
            secret=True,
            validator=url_problem,
            implied=_implied_url,
        ),
        ConfigField("elasticsearchHost", str, "", doc="RocketMQ Connect: the host (connection.url wins)"),
        ConfigField(
            "elasticsearchPort", int, 9200, doc="RocketMQ Connect: the port (with elasticsearchHost)"
        ),
        ConfigField("connection.username", str, "", doc="HTTP basic user"),
        ConfigField("connection.password", str, "", doc="HTTP basic password", secret=True),
        ConfigField("connection.timeout.ms", int, 5000, doc="ms to connect to a node", validator=at_least(1)),
        ConfigField(
            "read.timeout.ms", int, 30_000, doc="ms to wait for a bulk response", validator=at_least(1)
        ),
        ConfigField(
            "key.ignore",
            bool,
            False,
            doc="document id = topic+queue+offset instead of the record key",
        ),
        ConfigField(
            "schema.ignore",
            bool,
            False,
            doc="leave mappings to OpenSearch; false: a new index gets a mapping from the record schema",
        ),
        ConfigField(
            "write.method",
            str,
            "insert",
            doc="insert replaces the whole document; upsert merges the record's fields into it",
            choices=WRITE_METHODS,
            normalize=_lower,
        ),
        ConfigField(
            "behavior.on.null.values",
            str,
            "fail",
            doc="a null value (tombstone): delete its document, ignore it, or fail as a bad record",
            choices=NULL_BEHAVIORS,
            normalize=_lower,
        ),
        ConfigField(
            "topic.index.map",
            list[str],
            [],
            doc="topic:index pairs; other topics go to the index named as the topic, lower-cased",
            validator=index_map_problem,
        ),
        ConfigField("batch.size", int, 2000, doc="documents per bulk request", validator=at_least(1)),
        ConfigField(
            "max.retries",
            int,
            5,
            doc="retries of a bulk request (or of its items) refused with 429 or 5xx, or unanswered",
            validator=at_least(0),
        ),
        ConfigField(
            "retry.backoff.ms",
            int,
            100,
            doc="wait before the first retry; doubles each retry, with jitter",
            validator=at_least(0),
        ),
        ConfigField(
            "drop.invalid.message",
            bool,
            False,
            doc="skip (and log) a record that cannot be a document; false: it is a bad record",
        ),
    )
)


def connector_errors(config: Mapping[str, Any], owner: str) -> list[FieldError]:
    """What the fields alone cannot check: some URL must be given, one way or the other."""
    if not split_list(str(config.get("connection.url") or "")):
        message = f"{owner}: field 'connection.url' is required (or RocketMQ Connect's elasticsearchHost)"
        return [FieldError("connection.url", message)]
    return []


def urls(config: Mapping[str, Any]) -> list[str]:
    """The service URLs, without user information and trailing slashes (credentials go apart)."""
    out = []
    for url in split_list(str(config.get("connection.url") or "")):
        parts = urlsplit(url)
        netloc = parts.hostname or ""
        if ":" in netloc:  # IPv6
            netloc = f"[{netloc}]"
        if parts.port:
            netloc = f"{netloc}:{parts.port}"
        out.append(urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", "")))
    return out


def credentials(config: Mapping[str, Any]) -> tuple[str, str] | None:
    """HTTP basic credentials: the keys', else the first URL's ``user:password@``."""
    user = str(config.get("connection.username") or "")
    password = str(config.get("connection.password") or "")
    if not user:
        for url in split_list(str(config.get("connection.url") or "")):
            parts = urlsplit(url)
            if parts.username:
                return parts.username, parts.password or ""
        return None
    return user, password


def shown_url(url: str) -> str:
    """``url`` as errors and logs may show it: no user information, no query."""
    return urls({"connection.url": url})[0] if url.strip() else ""


def index_map(config: Mapping[str, Any]) -> dict[str, str]:
    pairs = config.get("topic.index.map") or []
    if isinstance(pairs, str):
        pairs = split_list(pairs)
    found = {}
    for pair in pairs:
        topic, _, index = str(pair).partition(":")
        found[topic.strip()] = index.strip()
    return found


def index_for(topic: str, mapping: Mapping[str, str]) -> str:
    """The index of a record's topic (after transforms: a RegexRouter's topic names the index)."""
    return mapping.get(topic) or topic.lower()
