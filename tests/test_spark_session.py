"""The process's one SparkSession, used from task threads the way the worker uses it."""

from __future__ import annotations

import threading

from sluice.activities.spark import get_spark
from sluice.connectors.rocketmq.spark_source import register
from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.deploy.local.config import StackConfig


def test_rocketmq_write_from_another_thread_finds_the_data_source(
    spark, stack_config: StackConfig, topic_name: str
) -> None:
    """Regression: Spark resolves Python data sources on write through the thread's active session,
    so a task thread's first write failed with DATA_SOURCE_NOT_FOUND."""
    register(spark)
    errors: list[BaseException] = []

    def task_thread() -> None:
        try:
            session = get_spark()
            df = session.createDataFrame([("from-thread",)], "body string")
            df.write.format("rocketmq").option("namesrv", stack_config.namesrv_address).option(
                "topic", topic_name
            ).mode("append").save()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=task_thread)
    thread.start()
    thread.join()
    assert not errors, errors
    with SyncRocketMQClient(stack_config.namesrv_address) as client:
        bodies = [
            m.body
            for mq in client.queues(topic_name)
            for m in client.pull_range(mq, 0, client.max_offset(mq))
        ]
    assert bodies == [b"from-thread"]
