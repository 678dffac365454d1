"""Workflow code parses nothing a user wrote: every malformed value of every common field is a
per-field error naming the connector and the field, before anything starts; and a workflow started
directly (as `temporal workflow start` would) with a malformed config ends FAILED with that error
in its status instead of failing its workflow task in a loop.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from temporalio import activity
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from sluice.activities.connector_activities import validate_config
from sluice.workflows.connector import ConnectorWorkflow
from sluice.workflows.types import (
    VALIDATE_ACTIVITY,
    ConnectorSpec,
    ConnectorState,
    ValidationResult,
    WorkflowState,
)

SOURCE = {"connector.class": "file-source", "file": "/tmp/in.txt", "topic": "t1"}
SINK = {"connector.class": "file-sink", "file": "/tmp/out.txt", "topics": "t1"}
NAME = "conn-7"

# (field, malformed value) for the fields every connector has.
COMMON = [
    ("tasks.max", "abc"),
    ("tasks.max", "0"),
    ("tasks.max", "1.5"),
    ("tasks.max", "${env:SLUICE_TASKS}"),
    ("batch.max.records", "many"),
    ("batch.max.records", "0"),
    ("batch.max.bytes", "-1"),
    ("batch.max.bytes", "1e9"),
    ("poll.interval.ms", "-5"),
    ("poll.interval.ms", "soon"),
    ("errors.tolerance", "some"),
    ("data.loss", "ignore"),
    ("task.heartbeat.timeout.s", "abc"),
    ("task.heartbeat.timeout.s", "0"),
    ("task.heartbeat.timeout.s", "-3"),
    ("task.heartbeat.timeout.s", "nan"),
    ("task.heartbeat.timeout.s", "inf"),
    ("task.heartbeat.timeout.s", "${env:SLUICE_HB}"),
    ("errors.retry.timeout", "-2"),
    ("errors.retry.timeout", "forever"),
    ("errors.retry.delay.max.ms", "-1"),
    ("errors.retry.delay.max.ms", "30s"),
    ("key.converter", "avro"),
    ("value.converter", "xml"),
    ("value.converter.schemas.enable", "maybe"),
    ("transforms", "t"),  # an alias without transforms.t.type
]


@pytest.mark.parametrize(
    ("base", "extra"),
    [(SOURCE, [("topic", ""), ("topic.queues", "0")]), (SINK, [("topics", "")])],
    ids=["source", "sink"],
)
def test_every_common_field_rejects_malformed_values_by_name(
    base: dict[str, str], extra: list[tuple[str, str]]
) -> None:
    assert validate_config(NAME, base).errors == []
    for field, value in [*COMMON, *extra]:
        errors = validate_config(NAME, {**base, field: value}).errors
        assert errors, f"{field}={value!r} was accepted"
        assert all(NAME in e for e in errors), errors
        field_named = field if field != "transforms" else "transforms.t.type"
        assert any(field_named in e for e in errors), (field, value, errors)


def test_typed_options_come_from_the_declared_fields() -> None:
    result = validate_config(
        NAME,
        {
            **SOURCE,
            "task.heartbeat.timeout.s": "2.5",
            "errors.retry.timeout": "60000",
            "errors.retry.delay.max.ms": "5000",
        },
    )
    assert result.errors == [] and result.options is not None
    assert (result.options.heartbeat_timeout_s, result.options.retry_timeout_ms) == (2.5, 60000)
    assert (result.options.retry_delay_max_ms, result.options.task_count) == (5000, 1)
    defaults = validate_config(NAME, SOURCE).options
    assert defaults is not None and defaults.retry_timeout_ms == -1 and defaults.retry_delay_max_ms == 30000


def test_plugins_that_raise_and_non_string_values_are_errors_not_exceptions() -> None:
    assert "connector.class" in validate_config(NAME, {"connector.class": "no.such.module:Thing"}).errors[0]
    errors = validate_config(NAME, {**SOURCE, "tasks.max": 2}).errors  # type: ignore[dict-item]
    assert errors == [f"connector {NAME!r}: field 'tasks.max': expected a string value, got 2"]


@activity.defn(name=VALIDATE_ACTIVITY)
def validate_for_real(spec: ConnectorSpec) -> ValidationResult:
    """The worker's validate activity (ConnectorActivities.validate) without the runtime context."""
    return validate_config(spec.name, spec.config)


@pytest.mark.parametrize(
    ("field", "value"),
    [("task.heartbeat.timeout.s", "abc"), ("errors.retry.timeout", "x"), ("tasks.max", "0")],
)
async def test_workflow_started_directly_with_malformed_config_ends_failed(
    wf_env: WorkflowEnvironment, field: str, value: str
) -> None:
    queue = f"malformed-{uuid.uuid4().hex[:8]}"
    name = f"bad-{uuid.uuid4().hex[:8]}"
    with ThreadPoolExecutor(2) as executor:
        async with Worker(
            wf_env.client,
            task_queue=queue,
            workflows=[ConnectorWorkflow],
            activities=[validate_for_real],
            activity_executor=executor,
        ):
            final = await wf_env.client.execute_workflow(
                ConnectorWorkflow.run,
                WorkflowState(name=name, config={**SOURCE, field: value}),
                id=f"sluice-connector-{name}",
                task_queue=queue,
            )
    assert final.state == ConnectorState.FAILED
    assert name in final.error and field in final.error and repr(value) in final.error
