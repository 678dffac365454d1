"""What an ``mqtt-source`` subscribes to and where each message goes: topic filters checked as the
MQTT specification writes them, and rules from a filter to a RocketMQ topic.

- ``mqtt.topics`` (``sourceTopic``): topic filters, comma-separated, with ``+`` (one level) and
  ``#`` (the rest, last level only); ``$share/<group>/<filter>`` is written by Sluice itself
  when tasks share a filter (``mqtt.shared.group``), so filters are given without it.
- ``mqtt.topic.rules``: ``filter=>topic;filter2=>topic2`` sends what a filter matches to that
  RocketMQ topic; a message goes by the first rule whose filter matches its MQTT topic. Filters
  without a rule go to ``topic`` (``connect.topicname``).

Pure functions, tested by tables (tests/connectors/test_mqtt_rules.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from sluice.connectors.config import topic_name_problem

SHARE_PREFIX: Final = "$share/"


def filter_problem(topic_filter: str) -> str | None:
    """Why ``topic_filter`` is not a valid MQTT topic filter, or None."""
    if not topic_filter:
        return "an empty topic filter"
    if topic_filter.startswith(SHARE_PREFIX):
        return f"{topic_filter!r}: give the filter without $share/ (set mqtt.shared.group instead)"
    if "\x00" in topic_filter or len(topic_filter.encode()) > 65535:
        return f"{topic_filter!r} is not a topic filter (a NUL character, or over 65,535 bytes)"
    levels = topic_filter.split("/")
    for i, level in enumerate(levels):
        if "#" in level and (level != "#" or i != len(levels) - 1):
            return f"{topic_filter!r}: '#' must be a whole level, and the last one"
        if "+" in level and level != "+":
            return f"{topic_filter!r}: '+' must be a whole level"
    return None


def matches(topic_filter: str, topic: str) -> bool:
    """Whether MQTT ``topic`` matches ``topic_filter`` (``$``-topics only by filters naming them)."""
    if topic.startswith("$") and topic_filter[:1] in ("+", "#"):
        return False
    want, got = topic_filter.split("/"), topic.split("/")
    for i, level in enumerate(want):
        if level == "#":
            return True
        if i >= len(got) or (level != "+" and level != got[i]):
            return False
    return len(want) == len(got)


@dataclass(frozen=True)
class Rule:
    """Messages matching ``topic_filter`` go to RocketMQ topic ``topic``."""

    topic_filter: str
    topic: str


def parse_rules(text: str) -> list[Rule]:
    """``filter=>topic;...`` (module docstring); ValueError naming the part that is wrong."""
    rules = []
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        if "=>" not in part:
            raise ValueError(f"{part!r} is not filter=>topic")
        topic_filter, topic = (s.strip() for s in part.split("=>", 1))
        problem = filter_problem(topic_filter) or topic_name_problem(topic)
        if problem:
            raise ValueError(f"{part!r}: {problem}")
        rules.append(Rule(topic_filter, topic))
    return rules


def routes(filters: list[str], rules_text: str, default_topic: str) -> list[Rule]:
    """Every subscription with its RocketMQ topic: the rules' filters first, in order, then the
    filters of ``mqtt.topics`` without a rule, to ``default_topic``. ValueError when a filter has
    nowhere to go."""
    rules = parse_rules(rules_text)
    ruled = {r.topic_filter for r in rules}
    for topic_filter in filters:
        if topic_filter in ruled:
            continue
        if not default_topic:
            raise ValueError(f"filter {topic_filter!r} has no rule and 'topic' is not set")
        rules.append(Rule(topic_filter, default_topic))
    if not rules:
        raise ValueError("no topic filter: set mqtt.topics (sourceTopic) or mqtt.topic.rules")
    return rules


def route_of(rules: list[Rule], topic: str) -> int | None:
    """Index of the first rule matching ``topic`` (None: no rule does)."""
    return next((i for i, r in enumerate(rules) if matches(r.topic_filter, topic)), None)


def filters_problem(value: Any) -> str | None:
    """Validator of ``mqtt.topics``."""
    for topic_filter in value:
        problem = filter_problem(str(topic_filter))
        if problem:
            return problem
    return None


def rules_problem(value: Any) -> str | None:
    """Validator of ``mqtt.topic.rules``."""
    try:
        parse_rules(str(value))
    except ValueError as exc:
        return str(exc)
    return None


def shared(topic_filter: str, group: str) -> str:
    """The subscription of a filter shared by a group's tasks (each message to one of them)."""
    return f"{SHARE_PREFIX}{group}/{topic_filter}" if group else topic_filter
