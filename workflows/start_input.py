"""A connector started from plain JSON (``temporal workflow start --input``) that Temporal could not
decode into the workflow's state: the FAILED state naming what is wrong, field by field.

Why: the Python SDK fails the *workflow task* when a start input does not decode into the run
method's type, and retries that task forever — a connector stuck "running" with nothing in its
status. ``ConnectorWorkflow`` therefore takes ``WorkflowState | ConnectorStatus | Any``: input that
fits neither dataclass arrives here as the raw JSON value, and the connector ends FAILED with
per-field errors a ``temporal workflow query --type status`` shows. Only the shape is checked
(JSON types, never config values: the validate activity owns those), so this stays deterministic.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from sluice.workflows.failures import clip
from sluice.workflows.types import ConnectorState, WorkflowState, workflow_id_for

EXAMPLE = '{"name": "NAME", "config": {"connector.class": "file-source", "file": "/in.txt", "topic": "t"}}'
ACCEPTED = ("name", "config")
_INTERNAL = {f.name for f in fields(WorkflowState)} - set(ACCEPTED)


def _json_type(value: object) -> str:
    for kind, name in ((bool, "a boolean"), (str, "a string"), (int, "a number"), (float, "a number")):
        if isinstance(value, kind):
            return name
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "null" if value is None else type(value).__name__


def name_from(raw: object, workflow_id: str) -> str:
    """The input's name when it has one, else the name in the workflow id ``sluice-connector-NAME``."""
    name = raw.get("name") if isinstance(raw, dict) else None
    return name if isinstance(name, str) and name else workflow_id.removeprefix(workflow_id_for(""))


def problems(raw: object, name: str) -> list[str]:
    """Every reason ``raw`` is not ``{"name": str, "config": {...}}``, each naming the connector
    and the field; never empty (the caller only asks about input that did not decode)."""
    where = f"connector {name}"
    if raw is None:
        return [f"{where}: the workflow has no input; start it with --input '{EXAMPLE}'"]
    if not isinstance(raw, dict):
        return [f"{where}: the workflow input must be a JSON object like {EXAMPLE}, got {_json_type(raw)}"]
    errors = []
    if "name" not in raw:
        errors.append(f"{where}: field 'name': required, the NAME of the workflow id sluice-connector-NAME")
    elif not isinstance(raw["name"], str):
        errors.append(f"{where}: field 'name': expected a string, got {_json_type(raw['name'])}")
    if "config" not in raw:
        errors.append(f"{where}: field 'config': required, an object of connector settings like {EXAMPLE}")
    elif not isinstance(raw["config"], dict):
        errors.append(
            f"{where}: field 'config': expected an object of string values, got {_json_type(raw['config'])}"
        )
    errors += [
        f"{where}: field {key!r}: internal workflow state, not accepted at start (give only name and config)"
        for key in sorted(raw)
        if key in _INTERNAL
    ]
    return errors or [f"{where}: the workflow input could not be read; start it with {EXAMPLE}"]


def failed_state(raw: Any, workflow_id: str) -> WorkflowState:
    """The state of a connector whose start input did not decode: FAILED, with every problem."""
    name = name_from(raw, workflow_id)
    config = raw.get("config") if isinstance(raw, dict) else None
    return WorkflowState(
        name=name,
        config=config if isinstance(config, dict) else {},
        state=ConnectorState.FAILED,
        error=clip("invalid input: " + "; ".join(problems(raw, name))),
    )
