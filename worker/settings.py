"""Worker and client settings from the environment, defaulting to the local stack."""

from __future__ import annotations

import os
from dataclasses import dataclass

from activities.context import RuntimeSettings
from deploy.local.config import StackConfig


@dataclass(frozen=True)
class WorkerSettings:
    temporal_address: str
    temporal_namespace: str
    task_queue: str
    runtime: RuntimeSettings
    max_concurrent_tasks: int = 8

    @classmethod
    def from_env(cls) -> WorkerSettings:
        stack = StackConfig.from_env()
        return cls(
            temporal_address=os.environ.get("SLUICE_TEMPORAL_ADDRESS") or stack.temporal_address,
            temporal_namespace=os.environ.get("SLUICE_TEMPORAL_NAMESPACE") or stack.temporal_namespace,
            task_queue=os.environ.get("SLUICE_TASK_QUEUE") or "sluice",
            runtime=RuntimeSettings(
                database_url=os.environ.get("SLUICE_DATABASE_URL") or stack.database_url,
                namesrv=os.environ.get("SLUICE_NAMESRV") or stack.namesrv_address,
                spark_master=os.environ.get("SLUICE_SPARK_MASTER") or stack.spark_master,
                store_schema=os.environ.get("SLUICE_STORE_SCHEMA") or "sluice",
            ),
            max_concurrent_tasks=int(os.environ.get("SLUICE_MAX_TASKS", "8")),
        )
