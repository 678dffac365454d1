"""One failure classification for every connector and the runtime: retry it, or fail the task.

Why one place: a task that retries an error no retry can fix sits at attempt 7 with status RUNNING
(issue 12), and one that fails on a passing outage needs a human for nothing. Every exception that
leaves a task's batch goes through :func:`classify`, which answers with a :class:`Failure`:

====================== ========================================================================
kind                   what falls in it (checked in this order)
====================== ========================================================================
``DataLossError``      the policy ``data.loss=fail`` met positions that are no longer retained
``PlanConflictError``  the offset store refused a plan that conflicts with the recorded one
``ConnectorDataError`` a record a converter, encoder, transform or sink cannot take
                       (``RecordError``, ``MessageTooLargeError``, text invalid in its encoding)
``ConfigError``        an invalid name or path: a config that fails validation, a path that is
                       a directory (or under a non-directory), a topic the broker refuses
                       (RocketMQ response code 29, INVALID_PARAMETER)
permission             ``PermissionError`` / RocketMQ ``AuthError``: retried for the first
                       :data:`PERMISSION_ATTEMPTS` attempts (an operator may be fixing a mode
                       or an ACL right now), then ``ConfigError``: it persisted, so it is
                       configuration, and a FAILED task says so where RUNNING would hide it
retriable              everything else: a service down, a timeout, a lock, a reset
                       connection, and any error not known to be permanent (an unknown error
                       is retried, visibly, rather than failing a task for good)
====================== ========================================================================

Spark runs Python code in worker processes, so an error raised there reaches the driver as text
inside a JVM or ``PythonException``: the classification then goes by the exception class names
and markers in that text. No temporalio or pyspark import here: connectors and tests use it
directly; ``sluice.activities.errors`` turns a :class:`Failure` into Temporal's ApplicationError.
"""

from __future__ import annotations

import errno
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

#: Attempts a permission problem is retried before the task fails with a ConfigError.
PERMISSION_ATTEMPTS: Final = 5
#: Longest message kept in a failure: Temporal stores failures in workflow history (a few KB each).
MAX_MESSAGE_CHARS: Final = 2000
#: RocketMQ's ResponseCode.INVALID_PARAMETER: the broker refuses a topic name (or system topic).
INVALID_PARAMETER_CODE: Final = 29


class FailureKind(StrEnum):
    """How a failure ends: the non-retryable kinds are the ApplicationError types the workflow knows."""

    RETRIABLE = "retriable"
    DATA = "ConnectorDataError"
    CONFIG = "ConfigError"
    DATA_LOSS = "DataLossError"
    PLAN_CONFLICT = "PlanConflictError"


@dataclass(frozen=True)
class Failure:
    """A classified error: its kind, a short message keeping the cause, and the error class name."""

    kind: FailureKind
    message: str
    error_type: str

    @property
    def retriable(self) -> bool:
        return self.kind is FailureKind.RETRIABLE


# Exception class names, for errors that reached the driver only as text (Spark Python workers).
_DATA_NAMES: Final = frozenset(
    {"RecordError", "ConnectorDataError", "MessageTooLargeError", "UnicodeDecodeError", "UnicodeEncodeError"}
)
_CONFIG_NAMES: Final = frozenset({"ConfigError", "IsADirectoryError", "NotADirectoryError", "TopicNameError"})
_PERMISSION_NAMES: Final = frozenset({"PermissionError", "AuthError"})
_DATA_LOSS_NAMES: Final = frozenset({"DataLossError"})
_PLAN_CONFLICT_NAMES: Final = frozenset({"PlanConflictError"})
_CONFIG_ERRNOS: Final = frozenset({errno.EISDIR, errno.ENOTDIR, errno.ENAMETOOLONG, errno.EROFS})
_PERMISSION_ERRNOS: Final = frozenset({errno.EACCES, errno.EPERM})

#: Spark's error classes for a value that cannot be what it is read or cast as: a record's content,
#: which no retry changes (a sink that decodes bytes which are not text, say).
_SPARK_DATA_ERRORS: Final = re.compile(
    r"\[(MALFORMED_CHARACTER_CODING|CAST_INVALID_INPUT|INVALID_UTF8_STRING)\]"
)
_RAISED: Final = re.compile(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception)): (.+)$", re.M)
_REFUSED_NAME: Final = re.compile(rf"\bcode {INVALID_PARAMETER_CODE}\b")


class ConnectorDataError(ValueError):
    """A record no retry can get through: a converter, encoder, transform or sink cannot take it.

    The message names the connector, partition and the record's source position.
    """


class TopicNameError(ValueError):
    """A topic name RocketMQ refuses (illegal characters, too long, or a system topic)."""


def shorten(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, keeping its head (what failed) and its tail (why)."""
    text = text.strip()
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head - 5
    return f"{text[:head]} ... {text[-tail:]}"


def _mro_names(exc: BaseException) -> list[str]:
    """Class names of ``exc``, most specific first (a DataLossError is also a RocketMQError)."""
    return [cls.__name__ for cls in type(exc).__mro__]


def _remote_error(text: str) -> tuple[str, str] | None:
    """The last ``SomeError: message`` line of a traceback carried as text (a Spark worker's)."""
    found = None
    for match in _RAISED.finditer(text):
        name = match.group(1)
        if name not in ("PythonException", "Py4JJavaError", "SparkException", "SparkRuntimeException"):
            found = (name, match.group(2))
    return found


def _kind_of_name(name: str, attempt: int) -> FailureKind | None:
    if name in _DATA_LOSS_NAMES:
        return FailureKind.DATA_LOSS
    if name in _PLAN_CONFLICT_NAMES:
        return FailureKind.PLAN_CONFLICT
    if name in _DATA_NAMES:
        return FailureKind.DATA
    if name in _CONFIG_NAMES:
        return FailureKind.CONFIG
    if name in _PERMISSION_NAMES:
        return FailureKind.CONFIG if attempt >= PERMISSION_ATTEMPTS else FailureKind.RETRIABLE
    return None


def classify(exc: BaseException, attempt: int = 1) -> Failure:
    """The kind of ``exc`` raised during the task's ``attempt``-th attempt (1-based); see the module
    docstring for the order of the rules."""
    text = str(exc) or repr(exc)
    name = type(exc).__name__
    spark_data = _SPARK_DATA_ERRORS.search(text)
    if spark_data:  # the line that names it, not the JVM stack around it
        line_start = text.rfind("\n", 0, spark_data.start()) + 1
        line_end = text.find("\n", spark_data.end())
        line = text[line_start : None if line_end < 0 else line_end]
        return Failure(FailureKind.DATA, shorten(line), spark_data.group(1))
    kind: FailureKind | None = None
    for cls_name in _mro_names(exc):
        kind = _kind_of_name(cls_name, attempt)
        if kind is not None:
            break
    if kind is None and isinstance(exc, OSError) and exc.errno is not None:
        if exc.errno in _CONFIG_ERRNOS:
            kind = FailureKind.CONFIG
        elif exc.errno in _PERMISSION_ERRNOS:
            kind = _kind_of_name("PermissionError", attempt)
    if kind is None and "RocketMQError" in _mro_names(exc) and _REFUSED_NAME.search(text):
        kind = FailureKind.CONFIG
    if kind is None:
        remote = _remote_error(text)
        if remote is not None:
            remote_kind = _kind_of_name(remote[0], attempt)
            if remote_kind is not None:
                return Failure(remote_kind, shorten(f"{remote[0]}: {remote[1]}"), remote[0])
    if kind is None:
        kind = FailureKind.RETRIABLE
        remote = _remote_error(text)
        if remote is not None and len(text) > MAX_MESSAGE_CHARS:  # keep the cause, not the JVM trace
            text = f"{name}: {remote[0]}: {remote[1]}"
    return Failure(kind, shorten(text), name)
