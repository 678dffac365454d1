"""Declared, typed connector configuration (Singer-style declarative fields, Kafka Connect key names).

Connector configs arrive as string maps (REST, CLI, files), just like Kafka Connect's. Each
connector declares its fields once as a :class:`ConfigDef`; the runtime validates the raw map up
front (every problem reported at once, each naming the connector and field) and hands tasks a typed
dict. No pyspark here: config validation (the CLI, the REST API) imports this module.

Keys that no field declares are kept verbatim by :meth:`ConfigDef.parse`, because whole families of
keys are dynamic (``transforms.<alias>.<option>``, ``predicates.<name>.<option>``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from sluice.connectors.secrets import REDACTED, has_reference, redact


class _Required:
    """Sentinel default meaning "the user must set this field"."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Final = _Required()

_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}


@dataclass(frozen=True)
class FieldError:
    """One problem with one field; ``message`` is complete on its own (names connector and field)."""

    field: str
    message: str

    def __str__(self) -> str:
        return self.message


class ConfigError(ValueError):
    """A config failed validation; carries every :class:`FieldError`, not just the first."""

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = list(errors)
        super().__init__("invalid configuration:\n  " + "\n  ".join(e.message for e in self.errors))


@dataclass(frozen=True)
class ConfigField:
    """One declared key: its type (``str``, ``int``, ``float``, ``bool`` or ``list[str]``), default, doc.

    ``validator`` returns an error message (without the field name) or ``None``; ``secret`` fields
    are redacted everywhere a config is shown.
    """

    name: str
    type: Any = str
    default: Any = REQUIRED
    doc: str = ""
    secret: bool = False
    validator: Callable[[Any], str | None] | None = None
    choices: tuple[Any, ...] | None = None
    #: other names users' existing files give this key (Kafka Connect's, RocketMQ Connect's)
    aliases: tuple[str, ...] = ()
    #: maps a converted value to its canonical spelling (a Java class name to a short name)
    normalize: Callable[[Any], Any] | None = None
    #: the default when it depends on other keys as the user wrote them (``schemas.enable`` is on
    #: for Kafka's JsonConverter class name, off for Sluice's ``json``); ``default`` otherwise
    implied: Callable[[Mapping[str, Any]], Any] | None = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def convert(self, raw: Any) -> Any:
        """Convert a raw (usually string) value to the declared type; raises ValueError with a reason."""
        kind = self.type
        if kind is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
            raise ValueError("expected a boolean (true/false)")
        if kind is int:
            if isinstance(raw, bool):
                raise ValueError("expected an integer")
            if isinstance(raw, int):
                return raw
            try:
                return int(str(raw).strip())
            except ValueError:
                raise ValueError("expected an integer") from None
        if kind is float:
            if isinstance(raw, bool):
                raise ValueError("expected a number")
            try:
                return float(raw)
            except (TypeError, ValueError):
                raise ValueError("expected a number") from None
        if kind == list[str] or kind is list:
            if isinstance(raw, list | tuple):
                return [str(item).strip() for item in raw if str(item).strip()]
            return split_list(str(raw))
        if kind is str:
            if not isinstance(raw, str):
                raise ValueError("expected a string")
            return raw
        raise TypeError(f"field {self.name!r}: unsupported declared type {kind!r}")


def split_list(text: str) -> list[str]:
    """Kafka's comma-separated list: items stripped, empty items dropped."""
    return [part.strip() for part in text.split(",") if part.strip()]


@dataclass(frozen=True)
class ConfigDef:
    """The declared fields of one connector (or transform); ``owner`` names it in every message."""

    fields: tuple[ConfigField, ...]
    owner: str = ""
    _by_name: dict[str, ConfigField] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name: dict[str, ConfigField] = {}
        for f in self.fields:
            if f.name in by_name:
                raise ValueError(f"{self.owner or 'config'}: field {f.name!r} declared twice")
            by_name[f.name] = f
        object.__setattr__(self, "_by_name", by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __getitem__(self, name: str) -> ConfigField:
        return self._by_name[name]

    @property
    def secret_names(self) -> frozenset[str]:
        return frozenset(f.name for f in self.fields if f.secret)

    def extend(self, *others: ConfigDef | tuple[ConfigField, ...], owner: str | None = None) -> ConfigDef:
        """A new def with more fields; a later field with the same name replaces the earlier one."""
        merged = dict(self._by_name)
        for other in others:
            for f in other.fields if isinstance(other, ConfigDef) else other:
                merged[f.name] = f
        return ConfigDef(tuple(merged.values()), owner=self.owner if owner is None else owner)

    def with_owner(self, owner: str) -> ConfigDef:
        return ConfigDef(self.fields, owner=owner)

    def _prefix(self, name: str) -> str:
        return f"{self.owner}: field {name!r}" if self.owner else f"field {name!r}"

    def canonical(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """``raw`` with every alias key renamed to the field's own name (the own name wins).

        Applied once where a config enters the runtime, so everything after it — task configs,
        status, Temporal history — speaks one set of names whichever peer's file it came from.
        """
        out = dict(raw)
        for f in self.fields:
            for alias in f.aliases:
                if alias in out:
                    value = out.pop(alias)
                    out.setdefault(f.name, value)
        return out

    def _alias_conflicts(self, raw: Mapping[str, Any]) -> list[FieldError]:
        errors = []
        for f in self.fields:
            given = [k for k in (f.name, *f.aliases) if k in raw]
            if len({str(raw[k]) for k in given}) > 1:
                errors.append(
                    FieldError(
                        f.name,
                        f"{self._prefix(f.name)} is given twice with different values, as "
                        + " and ".join(repr(k) for k in given),
                    )
                )
        return errors

    def _check(self, raw: Mapping[str, Any]) -> tuple[dict[str, Any], list[FieldError]]:
        values: dict[str, Any] = {}
        errors: list[FieldError] = self._alias_conflicts(raw)
        raw = self.canonical(raw)
        for f in self.fields:
            present = f.name in raw and raw[f.name] is not None
            if not present or (
                isinstance(raw[f.name], str) and not raw[f.name].strip() and f.type is not str
            ):
                if f.required:
                    errors.append(FieldError(f.name, f"{self._prefix(f.name)} is required{_doc(f)}"))
                    continue
                default = f.default if f.implied is None else f.implied(raw)
                values[f.name] = list(default) if isinstance(default, list | tuple) else default
                continue
            shown = REDACTED if f.secret else repr(raw[f.name])
            if has_reference(raw[f.name]):
                # ${env:…} / ${file:…} is resolved only inside the task activity; the value it
                # stands for is checked there, when the task parses its resolved config.
                values[f.name] = raw[f.name]
                continue
            try:
                value = f.convert(raw[f.name])
            except ValueError as exc:
                errors.append(FieldError(f.name, f"{self._prefix(f.name)}: {exc}, got {shown}"))
                continue
            if f.normalize is not None:
                value = f.normalize(value)
            if f.choices is not None:
                candidates = value if isinstance(value, list) else [value]
                bad = [v for v in candidates if v not in f.choices]
                if bad:
                    allowed = ", ".join(str(c) for c in f.choices)
                    errors.append(
                        FieldError(f.name, f"{self._prefix(f.name)}: must be one of {allowed}, got {shown}")
                    )
                    continue
            if f.validator is not None:
                problem = f.validator(value)
                if problem:
                    errors.append(FieldError(f.name, f"{self._prefix(f.name)}: {problem}, got {shown}"))
                    continue
            values[f.name] = value
        return values, errors

    def validate(self, raw: Mapping[str, Any]) -> list[FieldError]:
        """Every problem of ``raw`` against the declared fields (empty list: valid)."""
        return self._check(raw)[1]

    def parse(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """Typed values with defaults applied; undeclared keys kept verbatim. Raises :class:`ConfigError`."""
        values, errors = self._check(raw)
        if errors:
            raise ConfigError(errors)
        extra = {k: v for k, v in self.canonical(raw).items() if k not in self._by_name}
        return {**extra, **values}

    def redact(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """A copy safe to log or show: secret fields (and secret-looking keys) become ``********``."""
        return redact(raw, self.secret_names)


def _doc(f: ConfigField) -> str:
    return f" ({f.doc})" if f.doc else ""


def at_least(minimum: int) -> Callable[[Any], str | None]:
    """Validator: an integer no smaller than ``minimum``."""

    def check(value: Any) -> str | None:
        return None if value >= minimum else f"must be >= {minimum}"

    return check


def non_empty(value: Any) -> str | None:
    """Validator: a non-blank string or non-empty list."""
    if isinstance(value, str):
        return None if value.strip() else "must not be empty"
    return None if value else "must not be empty"


# RocketMQ's TopicValidator: the characters and length a broker accepts (it answers code 29,
# INVALID_PARAMETER, otherwise), and the system topics it keeps for itself.
_TOPIC_CHARS: Final = re.compile(r"[%|a-zA-Z0-9_-]+")
TOPIC_MAX_LENGTH: Final = 127
_SYSTEM_TOPIC_PREFIX: Final = "rmq_sys_"
_SYSTEM_TOPICS: Final = frozenset(
    {
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "SCHEDULE_TOPIC_XXXX_V2",
        "BenchmarkTest",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    }
)


def topic_name_problem(name: str) -> str | None:
    """Why RocketMQ refuses ``name`` as a topic (None: it accepts it). Checked at validation because
    the broker only says so when the task first creates or sends to the topic."""
    if not _TOPIC_CHARS.fullmatch(name):
        return "RocketMQ topic names allow only letters, digits, '%', '|', '_' and '-'"
    if len(name) > TOPIC_MAX_LENGTH:
        return f"RocketMQ topic names are at most {TOPIC_MAX_LENGTH} characters (this one has {len(name)})"
    if name in _SYSTEM_TOPICS or name.startswith(_SYSTEM_TOPIC_PREFIX):
        return "this is a RocketMQ system topic"
    return None


def valid_topic(value: Any) -> str | None:
    """Validator: one topic name RocketMQ accepts."""
    return non_empty(value) or topic_name_problem(str(value))


def valid_topics(value: Any) -> str | None:
    """Validator: a non-empty list of topic names RocketMQ accepts (names the first bad entry)."""
    if not value:
        return "must not be empty"
    for name in value:
        problem = topic_name_problem(str(name))
        if problem:
            return f"topic {str(name)!r}: {problem}"
    return None


def valid_optional_topic(value: Any) -> str | None:
    """Validator: empty (not set) or a topic name RocketMQ accepts."""
    return topic_name_problem(str(value)) if str(value).strip() else None


CONVERTER_CHOICES: Final = ("string", "json", "bytes")
#: Converter class names in Kafka Connect's and RocketMQ Connect's configs, and Sluice's converter
#: each one means (docs/connectors.md, "Aliases").
CONVERTER_ALIASES: Final = {
    "org.apache.kafka.connect.json.JsonConverter": "json",
    "org.apache.kafka.connect.storage.StringConverter": "string",
    "org.apache.kafka.connect.converters.ByteArrayConverter": "bytes",
    "org.apache.rocketmq.connect.runtime.converter.record.json.JsonConverter": "json",
    "org.apache.rocketmq.connect.runtime.converter.JsonConverter": "json",
    "org.apache.rocketmq.connect.runtime.converter.record.StringConverter": "string",
    "org.apache.rocketmq.connect.runtime.converter.record.ByteArrayConverter": "bytes",
}
#: Converter class names whose ``schemas.enable`` is true unless the config says otherwise, for keys
#: and values alike (Kafka's JsonConverterConfig and RocketMQ Connect's record JsonConverterConfig:
#: SCHEMAS_ENABLE_DEFAULT = true). RocketMQ Connect's older ``converter.JsonConverter`` writes plain
#: JSON and has no such setting; Sluice's own ``json`` keeps schemas off unless asked.
SCHEMAS_BY_DEFAULT: Final = frozenset(
    {
        "org.apache.kafka.connect.json.JsonConverter",
        "org.apache.rocketmq.connect.runtime.converter.record.json.JsonConverter",
    }
)


def converter_name(value: Any) -> Any:
    """Sluice's converter for a converter name or a known Kafka/RocketMQ Connect class name."""
    return CONVERTER_ALIASES.get(str(value).strip(), value)


def schemas_by_default(converter_key: str) -> Callable[[Mapping[str, Any]], bool]:
    """The default of ``<converter_key>.schemas.enable`` for a raw config: on when the converter is
    named by a class whose runtime turns schemas on by default (:data:`SCHEMAS_BY_DEFAULT`)."""

    def implied(raw: Mapping[str, Any]) -> bool:
        return str(raw.get(converter_key) or "").strip() in SCHEMAS_BY_DEFAULT

    return implied


def converter_fields(converter_key: str) -> tuple[ConfigField, ...]:
    """The converter and its ``schemas.enable`` for keys or values (``key.converter``/``value.converter``)."""
    return (
        ConfigField(converter_key, str, "string", choices=CONVERTER_CHOICES, normalize=converter_name),
        ConfigField(
            f"{converter_key}.schemas.enable",
            bool,
            False,
            doc="Connect JSON envelope {schema, payload}; default true for Kafka's and RocketMQ "
            "Connect's JsonConverter class names, false for 'json'",
            implied=schemas_by_default(converter_key),
        ),
    )


def idle_backoff_field(default_ms: int, why: str) -> ConfigField:
    """``poll.idle.max.ms`` with a connector's default: how far an idle task backs off (each idle
    poll costs the worker CPU, docs/scaling.md) against how late it sees the first record after a
    quiet spell. ``why`` says why that default, in the field's doc."""
    return ConfigField(
        "poll.idle.max.ms",
        int,
        default_ms,
        doc=f"back off while idle: the wait doubles after each empty poll up to this (0: no back-off; "
        f"default {why})",
        validator=at_least(0),
    )


_COMMON: Final = (
    ConfigField(
        "connector.class",
        str,
        doc="plugin short name, a Kafka/RocketMQ Connect class name, or 'module:Class'",
        validator=non_empty,
        aliases=("connector-class",),
    ),
    ConfigField("name", str, "", doc="connector name"),
    ConfigField(
        "tasks.max", int, 1, doc="upper bound on tasks", validator=at_least(1), aliases=("max.tasks",)
    ),
    *converter_fields("key.converter"),
    *converter_fields("value.converter"),
    ConfigField("value.converter.schema", str, "", doc="Spark DDL of the value for the json converter"),
    ConfigField("transforms", list[str], [], doc="comma list of transform aliases, applied in order"),
    ConfigField(
        "batch.max.records", int, 10_000, doc="admission limit per micro-batch", validator=at_least(1)
    ),
    ConfigField(
        "batch.max.bytes",
        int,
        64 * 1024 * 1024,
        doc="admission limit for byte-positioned sources",
        validator=at_least(1),
    ),
    ConfigField("poll.interval.ms", int, 1000, doc="idle wait between empty batches", validator=at_least(0)),
    idle_backoff_field(
        5000,
        "5 s, Confluent's JDBC source poll interval; a sink still wakes at once "
        "when a source of its store commits to its topics",
    ),
    ConfigField("errors.tolerance", str, "none", choices=("none", "all")),
    ConfigField(
        "errors.deadletterqueue.topic.name",
        str,
        "",
        doc="where bad records go with errors.tolerance=all",
        validator=valid_optional_topic,
    ),
    ConfigField(
        "data.loss", str, "fail", doc="when a position is no longer retained", choices=("fail", "skip")
    ),
    ConfigField(
        "task.heartbeat.timeout.s",
        float,
        10.0,
        doc="seconds without a heartbeat before a task counts as lost and is started again",
        validator=lambda v: None if 0 < v <= 3600 else "must be > 0 and <= 3600",
    ),
    ConfigField(
        "errors.retry.timeout",
        int,
        -1,
        doc="ms a task retries a retriable failure before it is FAILED; -1: without limit",
        validator=lambda v: None if v >= -1 else "must be -1 (no limit) or >= 0",
    ),
    ConfigField(
        "errors.retry.delay.max.ms",
        int,
        30_000,
        doc="longest wait between retries (from 1 s, doubling)",
        validator=at_least(0),
    ),
)

COMMON_SOURCE_FIELDS: Final[tuple[ConfigField, ...]] = (
    *_COMMON,
    ConfigField(
        "topic",
        str,
        doc="RocketMQ topic the records go to",
        validator=valid_topic,
        aliases=("connect.topicname",),
    ),
    ConfigField("topic.auto.create", bool, True, doc="create the topic if it does not exist"),
    ConfigField("topic.queues", int, 4, doc="queues of an auto-created topic", validator=at_least(1)),
)


def valid_regex(value: Any) -> str | None:
    """Validator: a Python regular expression (``topics.regex``), matched against whole topic names."""
    try:
        re.compile(str(value))
    except re.error as exc:
        return f"not a regular expression: {exc}"
    return None


#: The longest ``batch.linger.ms``: a pause or stop reaches a lingering sink only after its wait.
MAX_LINGER_MS: Final = 2_000

COMMON_SINK_FIELDS: Final[tuple[ConfigField, ...]] = (
    *_COMMON,
    ConfigField(
        "topics",
        list[str],
        [],
        doc="comma list of RocketMQ topics to read (or topics.regex)",
        validator=valid_topics,
        aliases=("connect.topicnames",),
    ),
    ConfigField(
        "topics.regex",
        str,
        "",
        doc="regular expression of the topics to read, matched against the broker's topic list before "
        "each batch (new matching topics are picked up)",
        validator=lambda v: valid_regex(v) if v else None,
    ),
    ConfigField(
        "batch.linger.ms",
        int,
        0,
        doc="a batch smaller than batch.max.records waits this long once for more messages (as a "
        "producer's linger.ms): fewer, larger batches under load, for this much latency",
        validator=lambda v: None if 0 <= v <= MAX_LINGER_MS else f"must be between 0 and {MAX_LINGER_MS}",
    ),
)
