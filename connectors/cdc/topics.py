"""Debezium's topic names (``<topic.prefix>.<schema or db>.<table>``) as RocketMQ topic names.

RocketMQ allows only letters, digits, ``%``, ``|``, ``_`` and ``-`` in a topic name, so every other
character — the dots first of all — becomes ``_`` (the JDBC source's rule, ``topic_for``):
``shop.public.orders`` -> ``shop_public_orders``. The mapping is not reversible (``a_b.c`` and
``a.b_c`` meet); a sink that wants the table back takes it from the envelope's ``source.table`` or
names it with ``RegexRouter``/``table.name.format``.
"""

from __future__ import annotations

from sluice.connectors.config import topic_name_problem
from sluice.connectors.jdbc.config import topic_for


def debezium_topic(prefix: str, *parts: str) -> str:
    """The RocketMQ topic of Debezium's ``prefix.part1.part2`` name."""
    return topic_for(".".join([prefix, *parts]), "")


def topic_problem(prefix: str, *parts: str) -> str | None:
    """Why the topic of ``prefix.parts`` cannot be used (too long, a system topic), or None."""
    name = debezium_topic(prefix, *parts)
    problem = topic_name_problem(name) if name else "empty topic name"
    return f"topic {name!r} of table {'.'.join(parts)!r}: {problem}" if problem else None
