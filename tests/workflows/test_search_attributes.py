"""The worker refuses to start on a namespace without Sluice's search attributes, naming each
missing one and the command that registers it (an unregistered one fails workflow tasks in a loop)."""

from __future__ import annotations

import uuid

import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.testing import WorkflowEnvironment

from sluice.deploy.local.temporal import SEARCH_ATTRIBUTES
from sluice.worker.main import MissingSearchAttributesError, check_search_attributes
from sluice.workflows import search_attributes


async def test_registered_attributes_pass(wf_env: WorkflowEnvironment) -> None:
    await check_search_attributes(wf_env.client, "default")


async def test_missing_attributes_are_one_line_naming_the_create_command(wf_env: WorkflowEnvironment) -> None:
    namespace = f"bare-{uuid.uuid4().hex[:6]}"
    await wf_env.client.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=namespace, workflow_execution_retention_period=Duration(seconds=86400)
        )
    )
    with pytest.raises(MissingSearchAttributesError) as err:
        await check_search_attributes(wf_env.client, namespace)
    text = str(err.value)
    assert "\n" not in text
    for name in ("ConnectorName", "ConnectorClass", "ConnectorState", "ConnectorKind"):
        assert (
            f"temporal operator search-attribute create --namespace {namespace} --name {name} --type Keyword"
            in text
        )


def test_one_list_of_names_for_workflow_and_stack() -> None:
    assert SEARCH_ATTRIBUTES == search_attributes.REGISTRATION
    assert [k.name for k in search_attributes.ALL] == list(SEARCH_ATTRIBUTES)
