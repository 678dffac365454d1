"""Connector configs from the files RocketMQ Connect's and Kafka Connect's users already keep.

Why three formats: Kafka Connect's standalone mode reads Java ``.properties`` files (``name=`` and
``connector.class=`` at top level), its REST API takes JSON either as ``{"name", "config"}``
(``POST /connectors``) or as the flat map (``PUT /connectors/{name}/config``), RocketMQ Connect's
REST API takes the flat JSON map, and people write YAML by hand. Each of those files is accepted
as it is, so moving a connector to Sluice is ``sluice connector create -f its-file``.

Rules (table-driven tests in tests/test_cli_config_files.py):

1. The format comes from the extension (``.json``; ``.yaml``/``.yml``; ``.properties``/``.conf``/
   ``.cfg``); any other extension is sniffed: ``{`` first means JSON, a YAML mapping means YAML,
   anything else is read as properties.
2. A mapping whose ``config`` key holds a mapping is the ``{name, config}`` shape: ``name`` names
   the connector and ``initial_state`` (RUNNING, PAUSED, STOPPED) is kept; ``tasks`` and ``type``
   (what Kafka's GET answers) are ignored. Any other mapping is the flat config; its ``name`` key
   names the connector and is dropped from the config (the connector's name lives in its workflow).
3. Values become strings the way Java would print them: ``true``/``false``, numbers as written, lists
   comma-joined (``topics: [a, b]`` -> ``a,b``); a nested mapping or a null is an error naming the key.
4. ``--set KEY=VALUE`` entries apply last, in order, overriding the file.

Every failure is a :class:`sluice.worker.errors.UsageError` (exit code 2) naming the file and, where
there is one, the key or line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluice.worker.errors import UsageError

INITIAL_STATES = ("RUNNING", "PAUSED", "STOPPED")
_JSON = (".json",)
_YAML = (".yaml", ".yml")
_PROPERTIES = (".properties", ".conf", ".cfg", ".props")


@dataclass(frozen=True)
class LoadedConfig:
    """A connector's config as read from a file and ``--set``; ``name`` is "" when none was given."""

    name: str = ""
    config: dict[str, str] = field(default_factory=dict)
    initial_state: str = ""


def load_config(path: str | None, sets: Iterable[str] = ()) -> LoadedConfig:
    """The file at ``path`` (optional), then every ``--set`` entry on top."""
    loaded = read_config_file(path) if path else LoadedConfig()
    config = dict(loaded.config)
    config.update(parse_sets(sets))
    return LoadedConfig(loaded.name, config, loaded.initial_state)


def parse_sets(sets: Iterable[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings in order (the value may hold ``=``); a later key wins."""
    out: dict[str, str] = {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set takes KEY=VALUE, got {item!r}")
        out[key.strip()] = value
    return out


def read_config_file(path: str) -> LoadedConfig:
    """Read and interpret one config file (see the module docstring for the rules)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read config file {path}: {exc.strerror or exc}") from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")  # java.util.Properties.load(InputStream)'s own encoding
    suffix = Path(path).suffix.lower()
    if suffix in _JSON or (suffix not in _YAML + _PROPERTIES and text.lstrip().startswith("{")):
        return interpret(_parse_json(path, text), path)
    if suffix in _YAML:
        return interpret(_parse_yaml(path, text), path)
    if suffix not in _PROPERTIES:
        try:
            sniffed = _parse_yaml(path, text)
        except UsageError:
            sniffed = None
        if isinstance(sniffed, dict):
            return interpret(sniffed, path)
    try:
        return interpret(parse_properties(text), path)
    except ValueError as exc:
        raise UsageError(f"config file {path} is not a valid properties file: {exc}") from exc


def _parse_json(path: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"config file {path} is not valid JSON: {exc}") from exc


def _parse_yaml(path: str, text: str) -> Any:
    import yaml  # yaml (~10 ms): the CLI imports this module at start; only a YAML file needs it

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"config file {path} is not valid YAML: {' '.join(str(exc).split())}") from exc


def interpret(loaded: Any, source: str) -> LoadedConfig:
    """A parsed document as a connector's name, config and initial state (rule 2 and 3)."""
    if not isinstance(loaded, Mapping):
        raise UsageError(
            f'config file {source} must hold a mapping of config keys (or {{"name": ..., "config": {{...}}}})'
        )
    if isinstance(loaded.get("config"), Mapping):
        name = loaded.get("name", "")
        body: Mapping[str, Any] = loaded["config"]
        state = str(loaded.get("initial_state") or "").upper()
        if state and state not in INITIAL_STATES:
            raise UsageError(
                f"config file {source}: initial_state must be one of {', '.join(INITIAL_STATES)}, got {state}"
            )
    elif "config" in loaded:
        raise UsageError(f"config file {source}: 'config' must be a mapping of config keys")
    else:
        name, body, state = loaded.get("name", ""), loaded, ""
    config = {str(k): _as_string(source, str(k), v) for k, v in body.items() if k != "name"}
    if not isinstance(name, str):
        raise UsageError(f"config file {source}: 'name' must be a string, got {name!r}")
    inner = body.get("name")
    if isinstance(inner, str) and inner and name and inner != name:
        raise UsageError(f"config file {source} names the connector both {name!r} and {inner!r}")
    return LoadedConfig(name or (inner if isinstance(inner, str) else ""), config, state)


def _as_string(source: str, key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ",".join(str(v) for v in value)
    shown = "null" if value is None else type(value).__name__
    raise UsageError(
        f"config file {source}: key {key!r} must be a string, number, boolean or list, got {shown}"
    )


# --- Java .properties (java.util.Properties.load) ---------------------------------------------------

_LINE_BREAK = re.compile(r"\r\n?|\n")  # Properties.load's only line terminators


def parse_properties(text: str) -> dict[str, str]:
    """Java's ``Properties.load`` rules, read by the ``javaproperties`` library rather than by hand.

    ``#``/``!`` comments, ``=``, ``:`` or whitespace as the separator, a trailing odd backslash
    continues the line (the next line's leading blanks dropped; at the end of the file it is dropped),
    ``\\t \\n \\r \\f \\uXXXX`` escapes (a UTF-16 surrogate pair becomes its one character), any
    other escaped character stands for itself; lines end at LF, CR LF or CR only, as in Java. Keys
    keep the file's order and a later duplicate wins.

    Why a wrapper rather than ``javaproperties.loads``: the library's error for a malformed
    ``\\uXXXX`` does not say where it is, and a user with a long connector file needs the line. So
    the elements are read one by one with :func:`javaproperties.parse`, counting physical lines, and
    the error becomes a ``ValueError`` that starts with ``line N:`` (the first line of the entry).
    """
    import javaproperties  # javaproperties (~10 ms): like yaml, only a properties file needs it

    out: dict[str, str] = {}
    line = 1  # the first physical line of the element being parsed
    try:
        for element in javaproperties.parse(text):
            if isinstance(element, javaproperties.KeyValue):
                out[element.key] = element.value
            line += len(_LINE_BREAK.findall(element.source))
    except javaproperties.InvalidUEscapeError as exc:
        raise ValueError(f"line {line}: {exc}") from exc
    return out
