"""What a replicator copies and where it goes: RocketMQ Connect's Replicator keys, as pure rules.

``src.topictags`` lists ``topic,tagExpression`` pairs separated by ``;`` (``t1,TagA||TagB;t2,*``,
a topic alone meaning every tag); ``src.instanceid`` namespaces the source topics
(``instance%topic``). The target topic of a source topic is ``dest.topic`` when set (every source
topic merged into it), else the legacy replicator's ``topic.rename.format`` with ``${topic}``
replaced, else the same name; ``dest.instanceid`` namespaces it. With ``enable.retrysync`` and
``enable.dlqsync``, the retry (``%RETRY%<group>``) and dead-letter (``%DLQ%<group>``) topics of the
groups in ``src.retrygids`` are copied too, to ``dest.retrytopic`` / ``dest.dlqtopic`` when set,
else under their own names (a group's retry and dead-letter topics are its own: merging them into
a business topic would hand them to every consumer of it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

RETRY_PREFIX: Final = "%RETRY%"
DLQ_PREFIX: Final = "%DLQ%"
EVERY_TAG: Final = "*"


@dataclass(frozen=True)
class CopiedTopic:
    """One source topic, the tags copied from it (None: every tag) and the topic it goes to."""

    source: str
    target: str
    tags: frozenset[str] | None = None


def parse_topic_tags(text: str) -> dict[str, frozenset[str] | None]:
    """``src.topictags`` as topic -> tags (None: every tag). Raises ValueError naming the item."""
    out: dict[str, frozenset[str] | None] = {}
    for item in (p.strip() for p in str(text).split(";")):
        if not item:
            continue
        parts = [p.strip() for p in item.split(",") if p.strip()]
        if len(parts) > 2:
            raise ValueError(f"{item!r} is not 'topic' or 'topic,tags' (tags joined by '||')")
        topic = parts[0]
        out[topic] = tag_set(parts[1] if len(parts) == 2 else EVERY_TAG)
    if not out:
        raise ValueError("names no topic (expected 'topic,tags;topic2,*')")
    return out


def tag_set(expression: str) -> frozenset[str] | None:
    """A RocketMQ tag expression (``TagA||TagB``, ``*``) as its tags, None for every tag."""
    tags = frozenset(t.strip() for t in expression.split("||") if t.strip())
    return None if not tags or EVERY_TAG in tags else tags


def namespaced(topic: str, instance_id: str | None) -> str:
    """RocketMQ's namespace form ``instance%topic`` (retry and dead-letter topics keep their prefix
    in front: ``%RETRY%instance%group``)."""
    if not instance_id:
        return topic
    for prefix in (RETRY_PREFIX, DLQ_PREFIX):
        if topic.startswith(prefix):
            return f"{prefix}{instance_id}%{topic[len(prefix) :]}"
    return f"{instance_id}%{topic}"


def target_topic(source: str, config: Mapping[str, Any]) -> str:
    """Where ``source`` (a topic as the source cluster names it) is copied to (module docstring)."""
    bare = _without_namespace(source, config.get("src.instanceid"))
    if bare.startswith(RETRY_PREFIX):
        target = str(config.get("dest.retrytopic") or "") or bare
    elif bare.startswith(DLQ_PREFIX):
        target = str(config.get("dest.dlqtopic") or "") or bare
    elif config.get("dest.topic"):
        target = str(config["dest.topic"])
    elif config.get("topic.rename.format"):
        target = str(config["topic.rename.format"]).replace("${topic}", bare)
    else:
        target = bare
    return namespaced(target, config.get("dest.instanceid"))


def copied_topics(config: Mapping[str, Any]) -> tuple[CopiedTopic, ...]:
    """Every topic a replicator copies, in the order its config names them (module docstring)."""
    instance = config.get("src.instanceid")
    tags = parse_topic_tags(str(config["src.topictags"]))
    groups = [g for g in config.get("src.retrygids") or [] if g]
    extra: dict[str, frozenset[str] | None] = {}
    if config.get("enable.retrysync"):
        extra.update({RETRY_PREFIX + g: None for g in groups})
    if config.get("enable.dlqsync"):
        extra.update({DLQ_PREFIX + g: None for g in groups})
    listed = {namespaced(t, instance): s for t, s in {**tags, **extra}.items()}
    return tuple(CopiedTopic(t, target_topic(t, config), s) for t, s in listed.items())


def _without_namespace(topic: str, instance_id: str | None) -> str:
    if not instance_id:
        return topic
    for prefix in (RETRY_PREFIX, DLQ_PREFIX, ""):
        marker = f"{prefix}{instance_id}%"
        if topic.startswith(marker):
            return prefix + topic[len(marker) :]
    return topic
