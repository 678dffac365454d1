"""Short workflows that let a client without plugin code check a config on a worker.

The light Python client (``sluice.Client``, worker/client.py) does not import plugins or Spark, so
what needs plugin code runs where the plugins are — on a worker of the task queue — as two tiny
workflows, each one activity long:

1. ``SluiceSecretFields`` (input: a connector class name, no config values) answers the fields that
   connector declares secret, so the client can seal them before any value enters Temporal;
2. ``SluiceValidateConfig`` (input: the config, secrets already sealed) runs the same validate
   activity the connector workflow runs and answers its :class:`ValidationResult`: per-field errors,
   or the connector's kind and class.

``validate_in_workflow`` is shared with ConnectorWorkflow, so both validate the same way.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from sluice.workflows.failures import NON_RETRYABLE_ERRORS
    from sluice.workflows.types import (
        SECRET_FIELDS_ACTIVITY,
        VALIDATE_ACTIVITY,
        ConnectorSpec,
        ValidationResult,
    )

VALIDATE_RETRY = RetryPolicy(maximum_attempts=3, non_retryable_error_types=list(NON_RETRYABLE_ERRORS))
SECRET_FIELDS_WORKFLOW = "SluiceSecretFields"
VALIDATE_WORKFLOW = "SluiceValidateConfig"


async def validate_in_workflow(name: str, config: dict[str, Any]) -> ValidationResult:
    """Validate and split ``config`` from workflow code; every outcome, even a failing activity,
    is a result (non-string values are refused here: the activity's input type is ``dict[str, str]``)."""
    bad = [k for k, v in config.items() if not isinstance(v, str)]
    if bad:
        return ValidationResult(
            str(config.get("connector.class", "")),
            "",
            [f"connector {name}: field {k!r}: expected a string value, got {config[k]!r}" for k in bad],
        )
    try:
        return await workflow.execute_activity(
            VALIDATE_ACTIVITY,
            ConnectorSpec(name, dict(config)),
            result_type=ValidationResult,
            start_to_close_timeout=timedelta(minutes=2),
            retry_policy=VALIDATE_RETRY,
        )
    except ActivityError as exc:
        cause = exc.cause or exc
        return ValidationResult("", "", [f"connector {name}: validation failed: {cause}"])


@workflow.defn(name=VALIDATE_WORKFLOW)
class ValidateConfigWorkflow:
    @workflow.run
    async def run(self, spec: ConnectorSpec) -> ValidationResult:
        return await validate_in_workflow(spec.name, dict(spec.config))


@workflow.defn(name=SECRET_FIELDS_WORKFLOW)
class SecretFieldsWorkflow:
    @workflow.run
    async def run(self, connector_class: str) -> list[str]:
        """The field names (aliases included) ``connector_class`` declares secret; [] if unknown."""
        result: list[str] = await workflow.execute_activity(
            SECRET_FIELDS_ACTIVITY,
            connector_class,
            result_type=list[str],
            start_to_close_timeout=timedelta(minutes=1),
            retry_policy=VALIDATE_RETRY,
        )
        return result
