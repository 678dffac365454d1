"""What every task activity needs, built once per worker process and shared by its tasks."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sluice.activities.spark import get_spark
from sluice.connectors.sealing import PROVIDER, Sealer

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sluice.activities.leases import WorkerLease
    from sluice.activities.reports import TaskReporter
    from sluice.activities.store import OffsetStore
    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient


@dataclass(frozen=True)
class RuntimeSettings:
    """Where the runtime's services are: a plain value handed in
    (``sluice.worker.settings.settings().runtime``), so activities never read the environment themselves."""

    database_url: str
    namesrv: str
    spark_master: str
    store_schema: str
    spark_driver_memory: str
    #: Spark tasks one side of a batch may run at once (``SLUICE_BATCH_TASKS``; see Settings)
    batch_tasks: int = 1
    #: The most records a batch may span to run in the worker's process, with no Spark job
    #: (``SLUICE_LOCAL_BATCH_MAX_RECORDS``; see Settings); 0: every batch runs on Spark
    local_batch_max_records: int = 100_000
    #: Jar files the SparkSession puts on its classpath (``SLUICE_SPARK_JARS``: the lake formats)
    spark_jars: tuple[str, ...] = ()
    #: Fernet key of ``${sealed:…}`` config values (connectors.sealing); None: none can be resolved
    sealing_key: bytes | None = None


class RuntimeContext:
    """Lazily built, process-wide dependencies: one store, one RocketMQ client, one SparkSession."""

    def __init__(self, settings: RuntimeSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._store: OffsetStore | None = None
        self._rocketmq: SyncRocketMQClient | None = None
        self._providers: dict[str, Callable[[str, str], str]] | None = None
        #: set by the worker (its Temporal client and loop); None in tests that run tasks directly
        self.reporter: TaskReporter | None = None
        #: set by the worker: the lease its task attempts hold (activities.leases); None in tests
        #: that run tasks directly, whose attempts Temporal's heartbeat timeout alone watches
        self.lease: WorkerLease | None = None

    def secret_providers(self) -> dict[str, Callable[[str, str], str]]:
        """Config providers that need the runtime: ``sealed`` when a sealing key is configured.

        Built once: the worker calls this before taking work, so ``cryptography`` is imported on
        one thread. Six tasks starting at once on a fresh worker each imported it in their own
        thread, beside the workflow sandbox's import hook, and one failed with CPython's
        ``SystemError: Objects/dictobject.c: bad argument to internal function``."""
        with self._lock:
            if self._providers is None:
                key = self.settings.sealing_key
                self._providers = {} if key is None else {PROVIDER: Sealer(key).unseal}
            return self._providers

    @property
    def store(self) -> OffsetStore:
        # Task threads ask concurrently; the lock makes sure only one store (and migration) exists.
        with self._lock:
            if self._store is None:
                # sqlalchemy: the CLI and REST server import this module (worker.settings)
                from sluice.activities.store import OffsetStore

                self._store = OffsetStore(self.settings.database_url, schema=self.settings.store_schema)
                self._store.migrate()
            return self._store

    @property
    def rocketmq(self) -> SyncRocketMQClient:
        with self._lock:
            if self._rocketmq is None:
                # the RocketMQ client (~25 ms): the CLI and REST server import this module (worker.settings)
                from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient

                self._rocketmq = SyncRocketMQClient(self.settings.namesrv)
            return self._rocketmq

    @property
    def spark(self) -> SparkSession:
        return get_spark(
            self.settings.spark_master,
            driver_memory=self.settings.spark_driver_memory,
            jars=self.settings.spark_jars,
        )

    def close(self) -> None:
        if self._rocketmq is not None:
            self._rocketmq.close()
        if self._store is not None:
            self._store.dispose()
