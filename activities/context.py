"""What every task activity needs, built once per worker process and shared by its tasks."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from activities.store import OffsetStore
    from connectors.rocketmq.sync_client import SyncRocketMQClient


@dataclass(frozen=True)
class RuntimeSettings:
    """Where the runtime's services are (README, 'Configuration')."""

    database_url: str
    namesrv: str
    spark_master: str = "local[2]"
    store_schema: str = "sluice"


class RuntimeContext:
    """Lazily built, process-wide dependencies: one store, one RocketMQ client, one SparkSession."""

    def __init__(self, settings: RuntimeSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()

    @cached_property
    def store(self) -> OffsetStore:
        from activities.store import OffsetStore

        store = OffsetStore(self.settings.database_url, schema=self.settings.store_schema)
        store.migrate()
        return store

    @cached_property
    def rocketmq(self) -> SyncRocketMQClient:
        from connectors.rocketmq.sync_client import SyncRocketMQClient

        return SyncRocketMQClient(self.settings.namesrv)

    @property
    def spark(self) -> SparkSession:
        from worker.spark import get_spark

        return get_spark(self.settings.spark_master)

    def close(self) -> None:
        if "rocketmq" in self.__dict__:
            self.rocketmq.close()
        if "store" in self.__dict__:
            self.store.dispose()
