"""Validate a connector config and split it into task configs: clients call this before starting a
workflow, and the workflow's validate activity calls it again (a workflow may be started directly).

Whatever the config holds, the answer is a :class:`ValidationResult` — per-field errors naming the
connector and field, or the task configs and the typed :class:`TaskOptions` the workflow runs with —
never an exception: plugin code that raises is reported as an error of that connector.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sluice.connectors.api import SinkConnector
from sluice.connectors.config import ConfigError
from sluice.connectors.direct import (
    SINK_PREFIX,
    SINK_TASK_CLASS,
    SOURCE_PREFIX,
    SOURCE_TASK_CLASS,
    DirectSides,
    direct_chain,
    direct_sides,
    direct_task_config,
    is_direct,
    side_secret_names,
)
from sluice.connectors.plugins import PluginNotFoundError, load_connector_class
from sluice.connectors.secrets import SecretResolutionError, has_reference, resolve_secrets
from sluice.workflows.types import TaskOptions, ValidationResult

# Fields the workflow itself uses: read at validation, before secrets are resolved in a task.
_RUNTIME_FIELDS = {
    "tasks.max": int,
    "task.heartbeat.timeout.s": float,
    "errors.retry.timeout": int,
    "errors.retry.delay.max.ms": int,
}


def _message(name: str, error: Any) -> str:
    text = str(getattr(error, "message", error))
    return text if text.startswith("connector ") else f"connector {name!r}: {text}"


def validate_config(
    name: str,
    config: Mapping[str, Any],
    secret_providers: Mapping[str, Callable[[str, str], str]] | None = None,
) -> ValidationResult:
    """Validate ``config`` of connector ``name``; see the module docstring.

    ``Connector.start`` sees the config with its secrets resolved where they can be (a source that
    lists a database's tables must log in); ``task_configs`` and the result keep the references, so
    no secret enters the workflow's history.
    """
    bad = [k for k, v in config.items() if not isinstance(k, str) or not isinstance(v, str)]
    if bad:
        return ValidationResult(
            str(config.get("connector.class", "")),
            "",
            [f"connector {name!r}: field {k!r}: expected a string value, got {config[k]!r}" for k in bad],
        )
    if is_direct(config):
        return _validate_direct(name, config, secret_providers)
    class_name = config.get("connector.class") or config.get("connector-class") or ""
    if not class_name.strip():
        return ValidationResult("", "", [f"connector {name!r}: field 'connector.class' is required"])
    try:
        connector_cls = load_connector_class(class_name)
    except PluginNotFoundError as exc:
        return ValidationResult(class_name, "", [f"connector {name!r}: field 'connector.class': {exc}"])
    except Exception as exc:  # a plugin that fails to import is this connector's error
        return ValidationResult(
            class_name,
            "",
            [f"connector {name!r}: field 'connector.class': {class_name} failed to load: {exc}"],
        )
    # One set of key names from here on (aliases from Kafka/RocketMQ Connect files renamed).
    config = connector_cls.full_config_def(name).canonical({**config, "connector.class": class_name})
    raw = {**config, "name": config.get("name") or name}
    kind = "sink" if issubclass(connector_cls, SinkConnector) else "source"
    try:
        connector = connector_cls()
        errors = [_message(name, e) for e in connector.validate(raw)]
        if errors:
            return ValidationResult(class_name, kind, errors)
        typed = connector.parse(raw)
        literal = [
            f"connector {name!r}: field {key!r}: must be a literal value (the runtime reads it before "
            f"secrets are resolved), got {typed[key]!r}"
            for key, kind_ in _RUNTIME_FIELDS.items()
            if key in typed and not isinstance(typed[key], kind_)
        ]
        if literal:
            return ValidationResult(class_name, kind, literal)
        max_tasks = typed.get("tasks.max", 1)
        connector.start(_resolved(connector, raw, typed, secret_providers))  # start, split, stop
        try:
            task_configs = [dict(c) for c in connector.task_configs(config, max_tasks)]
        finally:
            connector.stop()
    except Exception as exc:  # plugin code raising is reported, not propagated
        return ValidationResult(
            class_name, kind, [f"connector {name!r}: {class_name} rejected the config: {exc}"]
        )
    if not task_configs:
        return ValidationResult(class_name, kind, [f"connector {name!r}: produced no task configs"])
    defaults = TaskOptions()
    options = TaskOptions(
        heartbeat_timeout_s=float(typed.get("task.heartbeat.timeout.s", defaults.heartbeat_timeout_s)),
        retry_timeout_ms=int(typed.get("errors.retry.timeout", defaults.retry_timeout_ms)),
        retry_delay_max_ms=int(typed.get("errors.retry.delay.max.ms", defaults.retry_delay_max_ms)),
        task_count=len(task_configs),
    )
    return ValidationResult(class_name, kind, [], task_configs, options)


def _validate_direct(
    name: str,
    config: Mapping[str, Any],
    secret_providers: Mapping[str, Callable[[str, str], str]] | None,
) -> ValidationResult:
    """A direct pipeline (connectors.direct): each side validated as a connector of its own, the
    source side split into tasks; each task runs its source share into one sink task."""
    sides = direct_sides(config)
    label = f"{sides.source['connector.class']} -> {sides.sink['connector.class']}"
    if sides.missing:
        return ValidationResult(label, "source", [
            f"connector {name!r}: field {key!r} is required when connector.direct.enable=true"
            for key in sides.missing
        ])  # fmt: skip
    source = validate_config(name, sides.source, secret_providers)
    sink = validate_config(name, sides.sink, secret_providers)
    errors = [f"{e} (source side)" for e in source.errors] + [f"{e} (sink side)" for e in sink.errors]
    for key, result, kind in ((SINK_TASK_CLASS, sink, "sink"), (SOURCE_TASK_CLASS, source, "source")):
        if not errors and result.kind != kind:
            errors.append(f"connector {name!r}: field {key!r}: {result.connector_class} is not a {kind}")
    errors += _direct_refusals(name, sides) if not errors else []
    if errors:
        return ValidationResult(label, "source", errors)
    tasks = [direct_task_config(config, task, sink.task_configs[0]) for task in source.task_configs]
    return ValidationResult(label, "source", [], tasks, source.options)


def _direct_refusals(name: str, sides: DirectSides) -> list[str]:
    """The pipeline's own chain's problems, and what a direct pipeline cannot run, named: a Spark
    SQL transform (the batch never becomes a DataFrame)."""
    from sluice.connectors.transforms import runs_in_arrow  # the transforms load pyarrow

    try:
        chain = direct_chain(sides)
    except ConfigError as exc:
        return [f"connector {name!r}: {e.message}" for e in exc.errors]
    refused = []
    if not runs_in_arrow(chain):
        refused.append(f"connector {name!r}: field 'transforms': a direct pipeline runs no Spark SQL "
                       "transform (put a topic between source and sink for one)")  # fmt: skip
    return refused


def _resolved(
    connector: Any,
    raw: Mapping[str, Any],
    typed: dict[str, Any],
    providers: Mapping[str, Callable[[str, str], str]] | None,
) -> dict[str, Any]:
    """``typed`` with secret references resolved, when they resolve here (else as it is: a client
    process may lack the worker's environment; the task reports it when it starts)."""
    if not any(has_reference(v) for v in raw.values()):
        return typed
    try:
        return dict(connector.parse(resolve_secrets(raw, providers)))
    except (SecretResolutionError, ConfigError):
        return typed


def secret_fields(config: Mapping[str, Any]) -> frozenset[str]:
    """The fields ``config``'s connector declares secret (none when its class cannot be loaded:
    the caller then relies on secret-looking key names, connectors.sealing)."""
    if is_direct(config):
        sides = direct_sides(config)
        return side_secret_names(SOURCE_PREFIX, secret_fields(sides.source)) | side_secret_names(
            SINK_PREFIX, secret_fields(sides.sink)
        )
    class_name = str(config.get("connector.class") or config.get("connector-class") or "")
    try:
        connector_cls = load_connector_class(class_name)
        fields = connector_cls.full_config_def()
    except (PluginNotFoundError, ImportError, TypeError, ValueError):
        return frozenset()
    names = set(fields.secret_names)
    for name in fields.secret_names:
        names.update(fields[name].aliases)
    return frozenset(names)
