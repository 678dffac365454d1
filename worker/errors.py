"""The errors the client raises and the exit codes the CLI maps them to.

Every error names what it is about (the connector, the Temporal address) in a single line, so a
Python caller and a shell script get the same clarity: callers catch the class, scripts read
``$?``. The codes are part of the CLI's interface; change them only with docs/operating.md
("Exit codes").

======  ===========================================================================
 code   meaning
======  ===========================================================================
  0     the command succeeded
  1     unexpected error (one line; ``sluice --debug ...`` prints the traceback)
  2     usage error or invalid connector configuration
  3     connector not found (never created, or deleted)
  4     connector already exists
  5     operation not allowed in the connector's current state
  6     Temporal unreachable
  7     the connector did not answer (no ``sluice worker`` polling its task queue?)
  130   interrupted (Ctrl-C)
======  ===========================================================================
"""

from __future__ import annotations

import re

from temporalio.client import WorkflowUpdateFailedError

_FIELD = re.compile(r"field '([^']+)'")

EXIT_OK = 0
EXIT_UNEXPECTED = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_EXISTS = 4
EXIT_STATE = 5
EXIT_UNREACHABLE = 6
EXIT_NO_ANSWER = 7
EXIT_INTERRUPTED = 130


class SluiceError(Exception):
    """A known failure with a one-line message; ``exit_code`` is what the CLI returns for it."""

    exit_code = EXIT_UNEXPECTED


class UsageError(SluiceError):
    """The command line itself is wrong (a malformed ``--set``, an unreadable config file)."""

    exit_code = EXIT_USAGE


class TemporalUnavailableError(SluiceError):
    """Temporal's frontend did not answer; names the address so the user knows what to start."""

    exit_code = EXIT_UNREACHABLE

    def __init__(self, address: str, detail: str) -> None:
        super().__init__(f"cannot reach Temporal at {address}: {detail}")
        self.address = address


class ConnectorError(SluiceError):
    """A failure about one connector; ``connector`` is its name."""

    def __init__(self, connector: str, message: str) -> None:
        super().__init__(message)
        self.connector = connector


class ConnectorConfigError(ConnectorError, ValueError):
    """The config was rejected; ``errors`` holds one message per field, nothing was started."""

    exit_code = EXIT_USAGE

    def __init__(self, name: str, errors: list[str]) -> None:
        super().__init__(name, f"connector {name} has an invalid configuration: " + "; ".join(errors))
        self.errors = errors

    @property
    def fields(self) -> list[str]:
        """The config fields the errors name (``field 'topic' is required`` -> ``topic``), in order."""
        return list(dict.fromkeys(m for error in self.errors for m in _FIELD.findall(error)))


class ConnectorOffsetsError(ConnectorError, ValueError):
    """An offsets alter request that is malformed (names the entry); nothing was changed."""

    exit_code = EXIT_USAGE


class BackfillRequestError(ConnectorError, ValueError):
    """A backfill that cannot be requested (worker.backfills): the connector cannot backfill, a
    table it does not read, a condition its source refuses; the message names them, nothing was
    stored."""

    exit_code = EXIT_USAGE


class BackfillNotFoundError(ConnectorError, LookupError):
    """No backfill request of that number for the connector (``--cancel ID``)."""

    exit_code = EXIT_NOT_FOUND

    def __init__(self, name: str, request: int) -> None:
        super().__init__(name, f"connector {name} has no backfill request {request}")
        self.request = request


class ConnectorNotFoundError(ConnectorError, LookupError):
    """No connector of that name is running: never created, deleted, or its workflow has ended."""

    exit_code = EXIT_NOT_FOUND

    def __init__(self, name: str) -> None:
        super().__init__(name, f"connector {name} not found")


class ConnectorExistsError(ConnectorError):
    """A connector of that name already runs (create is not an upsert; use reconfigure)."""

    exit_code = EXIT_EXISTS

    def __init__(self, name: str) -> None:
        super().__init__(name, f"connector {name} already exists")


class ConnectorNotAnsweringError(ConnectorError):
    """Temporal holds the connector but no worker answered in time: queries need a live worker."""

    exit_code = EXIT_NO_ANSWER

    def __init__(self, name: str, task_queue: str, detail: str) -> None:
        super().__init__(
            name,
            f"connector {name} did not answer ({detail}); is a `sluice worker` running on task queue "
            f"{task_queue}?",
        )
        self.task_queue = task_queue


class ConnectorStateError(ConnectorError, WorkflowUpdateFailedError):
    """The workflow's update validator refused the operation in the connector's current state.

    Also a ``WorkflowUpdateFailedError`` (``cause`` is the workflow's ApplicationError), so code
    written against the raw Temporal client keeps working.
    """

    exit_code = EXIT_STATE

    def __init__(self, name: str, operation: str, cause: BaseException) -> None:
        # Not super(): WorkflowUpdateFailedError.__init__ would take the message for the cause.
        Exception.__init__(self, f"cannot {operation} connector {name}: {_reason(cause)}")
        self.connector = name
        self.operation = operation
        self.__cause__ = cause


def _reason(cause: BaseException) -> str:
    """The validator's own sentence, without the 'ValueError: ' prefix Temporal may add."""
    text = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    for prefix in ("ValueError: ", "ApplicationError: "):
        text = text.removeprefix(prefix)
    return text


def one_line(exc: BaseException) -> str:
    """An unexpected error as one line: its type and the first line of its message."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
