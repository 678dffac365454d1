"""The one failure classification: which errors fail a task for good, which are retried (table-driven)."""

from __future__ import annotations

import errno

import pytest
from psycopg import errors as pg_errors
from temporalio.exceptions import ApplicationError

from sluice.activities.errors import task_failure
from sluice.activities.store.errors import PlanConflictError
from sluice.connectors.config import ConfigError, FieldError
from sluice.connectors.errors import (
    MAX_MESSAGE_CHARS,
    PERMISSION_ATTEMPTS,
    ConnectorDataError,
    FailureKind,
    classify,
    shorten,
)
from sluice.connectors.records import RecordError
from sluice.connectors.rocketmq.errors import (
    AuthError,
    BrokerUnavailableError,
    MessageTooLargeError,
    NameServerUnavailableError,
    ProtocolError,
    RequestTimeoutError,
    RocketMQError,
    TopicNotFoundError,
)
from sluice.connectors.rocketmq.offsets import DataLossError

RETRIABLE, DATA, CONFIG = FailureKind.RETRIABLE, FailureKind.DATA, FailureKind.CONFIG

# A Python worker's failure as the driver sees it: JVM text around the worker's traceback.
SPARK_TEXT = (
    "An error occurred while calling o123.save.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed\n"
    "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
    '  File "/work/connectors/rocketmq/spark_writer.py", line 150, in write\n'
    "{raised}\n"
    "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(...)\n"
)


class RemoteFailure(Exception):
    """Stands for Py4JJavaError / PythonException: only the text tells what happened."""


def remote(raised: str) -> RemoteFailure:
    return RemoteFailure(SPARK_TEXT.format(raised=raised))


CASES: list[tuple[str, BaseException, int, FailureKind]] = [
    # records no retry can get through
    ("record error", RecordError("connector c: bad record at partition 'f' offset 7: x"), 1, DATA),
    ("connector data error", ConnectorDataError("sink cannot take it"), 1, DATA),
    ("message too large", MessageTooLargeError("rocketmq: message over 4194304"), 1, DATA),
    ("undecodable text", UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), 1, DATA),
    (
        "too large, from a Spark worker",
        remote("sluice.connectors.rocketmq.errors.MessageTooLargeError: rocketmq sink: record at offset 9"),
        1,
        DATA,
    ),
    # invalid names and paths
    ("config error", ConfigError([FieldError("file", "connector 'c': field 'file': bad")]), 1, CONFIG),
    ("directory", IsADirectoryError(errno.EISDIR, "Is a directory", "/tmp"), 1, CONFIG),
    ("under a file", NotADirectoryError(errno.ENOTDIR, "Not a directory", "/etc/passwd/x"), 1, CONFIG),
    ("name too long", OSError(errno.ENAMETOOLONG, "File name too long"), 1, CONFIG),
    ("read-only file system", OSError(errno.EROFS, "Read-only file system"), 1, CONFIG),
    (
        "topic refused by the broker",
        RocketMQError("rocketmq: create topic 'my.topic' at broker x: code 29: contains illegal characters"),
        1,
        CONFIG,
    ),
    ("directory, from a Spark worker", remote("IsADirectoryError: [Errno 21] Is a directory"), 1, CONFIG),
    # permissions: retried a few times (an operator may be fixing them), then configuration
    ("permission, first attempt", PermissionError(errno.EACCES, "Permission denied"), 1, RETRIABLE),
    ("permission, persisting", PermissionError(errno.EACCES, "denied"), PERMISSION_ATTEMPTS, CONFIG),
    ("EPERM as plain OSError, persisting", OSError(errno.EPERM, "no"), PERMISSION_ATTEMPTS, CONFIG),
    ("rocketmq ACL, first attempt", AuthError("rocketmq: permission denied"), 2, RETRIABLE),
    ("rocketmq ACL, persisting", AuthError("rocketmq: permission denied"), PERMISSION_ATTEMPTS + 3, CONFIG),
    # the store's own verdicts
    ("data loss", DataLossError("queue broker-a:0", "[0, 5)", "was deleted"), 1, FailureKind.DATA_LOSS),
    ("plan conflict", PlanConflictError("batch 3: ranges differ"), 1, FailureKind.PLAN_CONFLICT),
    # services down, timeouts, locks, resets: retried
    ("broker down", BrokerUnavailableError("rocketmq: connection refused"), 1, RETRIABLE),
    ("name server down", NameServerUnavailableError("rocketmq: no name server"), 1, RETRIABLE),
    ("request timeout", RequestTimeoutError("rocketmq: no response in 3s"), 1, RETRIABLE),
    ("connection reset", ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"), 1, RETRIABLE),
    ("timeout", TimeoutError("timed out"), 1, RETRIABLE),
    ("row lock", pg_errors.LockNotAvailable("could not obtain lock on row"), 1, RETRIABLE),
    ("topic not there yet", TopicNotFoundError("t"), 1, RETRIABLE),
    ("garbled frame", ProtocolError("rocketmq: short frame"), 1, RETRIABLE),
    ("other broker code", RocketMQError("rocketmq: send at broker x: code 1: store busy"), 1, RETRIABLE),
    ("reset, from a Spark worker", remote("ConnectionResetError: [Errno 104] reset by peer"), 1, RETRIABLE),
    ("unknown error", RuntimeError("something odd"), 1, RETRIABLE),
    ("missing file", FileNotFoundError(errno.ENOENT, "No such file", "/data/in.txt"), 1, RETRIABLE),
]


@pytest.mark.parametrize(("exc", "attempt", "kind"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_classify(exc: BaseException, attempt: int, kind: FailureKind) -> None:
    assert classify(exc, attempt).kind is kind


def test_a_worker_traceback_is_reduced_to_its_raised_line() -> None:
    raised = "sluice.connectors.rocketmq.errors.MessageTooLargeError: record at partition 'f' offset 12"
    failure = classify(RemoteFailure(SPARK_TEXT.format(raised=raised) + "\tat x.y(Z.java:1)\n" * 5000))
    assert failure.message == "MessageTooLargeError: record at partition 'f' offset 12"


def test_long_retriable_text_keeps_head_and_tail_within_the_limit() -> None:
    text = "head: what failed " + "." * 100_000 + " tail: why"
    short = shorten(text)
    assert len(short) <= MAX_MESSAGE_CHARS
    assert short.startswith("head: what failed") and short.endswith("tail: why")
    assert classify(RuntimeError(text)).message == short


def test_task_failure_is_a_short_application_error_naming_the_connector() -> None:
    error = task_failure("orders", 2, MessageTooLargeError("rocketmq: over the limit " + "x" * 10_000))
    assert error.type == "ConnectorDataError" and error.non_retryable
    assert error.message.startswith("connector orders task 2: rocketmq: over the limit")
    assert len(error.message) <= MAX_MESSAGE_CHARS + 100


def test_task_failure_of_a_retriable_error_keeps_its_class_name() -> None:
    error = task_failure("orders", 0, BrokerUnavailableError("rocketmq: connection refused"))
    assert error.type == "BrokerUnavailableError" and not error.non_retryable


@pytest.mark.parametrize(
    "message",
    [
        "connector orders: bad record at partition 'f' offset 3",
        "connector 'orders': OpenSearch at http://127.0.0.1:9200 did not take batch 4 after 3 retries",
        'connector "orders": the database refused the credentials',
    ],
)
def test_task_failure_does_not_prefix_a_message_naming_the_connector_already(message: str) -> None:
    assert task_failure("orders", 0, RecordError(message)).message == message


def test_task_failure_names_the_connector_of_a_message_naming_another() -> None:
    error = task_failure("orders", 1, RecordError("connector 'orders-old': bad record"))
    assert error.message == "connector orders task 1: connector 'orders-old': bad record"


def test_an_application_error_passes_through() -> None:
    original = ApplicationError("already decided", type="DataLossError", non_retryable=True)
    assert task_failure("orders", 0, original) is original


def test_a_spark_error_about_a_value_is_a_data_error_naming_its_line() -> None:
    line = "[MALFORMED_CHARACTER_CODING] Invalid value found when performing `decode` with `UTF-8`."
    failure = classify(
        RemoteFailure(f"org.apache.spark.SparkRuntimeException: {line}\n" + "\tat x.y(Z.java:1)\n" * 50)
    )
    assert failure.kind is FailureKind.DATA and not failure.retriable
    assert failure.message == f"org.apache.spark.SparkRuntimeException: {line}"
