"""Config providers: ``${env:NAME}`` and ``${file:/path/to/props:key}`` references in config values.

Modelled on Kafka's ConfigProvider / FileConfigProvider. References are stored (in Temporal
histories, PostgreSQL, logs) as written and resolved only inside activities, right before a task
starts, so secret values never enter a workflow history. Errors name the field and the provider,
never a value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Final

#: what a secret value is shown as in logs, status and error messages
REDACTED: Final = "********"
# ${provider:rest}; the rest is provider-specific (env: NAME, file: /path:key).
_REFERENCE: Final = re.compile(r"\$\{([A-Za-z][A-Za-z0-9_-]*):([^}]*)\}")
# Keys that look secret even when no ConfigDef says so (e.g. transform options, unknown connectors).
_SECRET_KEY: Final = re.compile(
    r"(password|passwd|secret|token|credential|private[._-]?key|api[._-]?key)", re.I
)


class SecretResolutionError(ValueError):
    """A reference could not be resolved; the message names field and provider, never a value."""


def _env_provider(field: str, argument: str) -> str:
    name = argument.strip()
    if not name:
        raise SecretResolutionError(
            f"config field {field!r}: provider 'env' needs a variable name: ${{env:NAME}}"
        )
    if name not in os.environ:
        raise SecretResolutionError(
            f"config field {field!r}: provider 'env': environment variable {name!r} is not set"
        )
    return os.environ[name]


def _file_provider(field: str, argument: str) -> str:
    path_text, sep, key = argument.rpartition(":")
    if not sep or not path_text or not key:
        raise SecretResolutionError(
            f"config field {field!r}: provider 'file' needs ${{file:/path/to/file.properties:key}}"
        )
    path = Path(path_text)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SecretResolutionError(
            f"config field {field!r}: provider 'file': cannot read {path}: "
            f"{exc.strerror or type(exc).__name__}"
        ) from None
    props = parse_properties(text)
    if key not in props:
        raise SecretResolutionError(
            f"config field {field!r}: provider 'file': key {key!r} not found in {path}"
        )
    return props[key]


PROVIDERS: Final[dict[str, Callable[[str, str], str]]] = {"env": _env_provider, "file": _file_provider}


def parse_properties(text: str) -> dict[str, str]:
    """The ``.properties`` subset secrets files use: ``key=value``, ``key: value``, ``#`` comments."""
    props: dict[str, str] = {}
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line or line[0] in "#!":
            continue
        match = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)", line)
        if match:
            props[match.group(1)] = match.group(2)
        else:
            props[line] = ""
    return props


def has_reference(value: object) -> bool:
    return isinstance(value, str) and _REFERENCE.search(value) is not None


def resolve_secrets(
    config: Mapping[str, Any], extra_providers: Mapping[str, Callable[[str, str], str]] | None = None
) -> dict[str, Any]:
    """A copy of ``config`` with every ``${provider:...}`` reference replaced by its value.

    Call this only inside an activity. ``extra_providers`` adds providers that need the runtime
    (``sealed``: connectors.sealing). Unknown providers and missing variables/files/keys raise
    :class:`SecretResolutionError` naming the field and provider.
    """
    providers = {**PROVIDERS, **(extra_providers or {})}
    resolved: dict[str, Any] = {}
    for key, value in config.items():
        if not has_reference(value):
            resolved[key] = value
            continue

        def substitute(match: re.Match[str], field: str = key) -> str:
            provider, argument = match.group(1), match.group(2)
            if provider not in providers:
                known = ", ".join(sorted(providers))
                raise SecretResolutionError(
                    f"config field {field!r}: unknown config provider {provider!r} (known: {known})"
                )
            return providers[provider](field, argument)

        resolved[key] = _REFERENCE.sub(substitute, value)
    return resolved


def is_secret_key(key: str) -> bool:
    return _SECRET_KEY.search(key) is not None


def redact(config: Mapping[str, Any], secret_fields: Iterable[str] = ()) -> dict[str, Any]:
    """A copy safe for logs and status: declared secret fields and secret-looking keys are masked.

    Unresolved references (``${env:DB_PASSWORD}``) are not secret, but a field declared secret is
    masked whatever its value, so a resolved config can be passed here too.
    """
    secret = set(secret_fields)
    return {
        k: (REDACTED if (k in secret or is_secret_key(k)) and v not in (None, "") else v)
        for k, v in config.items()
    }
