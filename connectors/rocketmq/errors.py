"""Errors raised by Sluice's RocketMQ remoting client.

One base class so callers can catch "anything RocketMQ", and one subclass per situation a caller
handles differently: retry later (unavailable, timeout), fix configuration (auth, unknown topic),
report data loss (offset out of range), or fix the data (message too large). Every message names
the service, address, topic and queue involved so a failed task explains itself without a debugger.
Secrets (ACL keys, signatures) never appear in messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sluice.connectors.rocketmq.values import MessageQueue


class RocketMQError(Exception):
    """Base of every error raised by connectors.rocketmq."""


class RetriableError(RocketMQError):
    """A failure worth retrying after a pause (the service may come back or calm down)."""


class NameServerUnavailableError(RetriableError):
    """No configured name server answered."""


class BrokerUnavailableError(RetriableError):
    """A broker refused or dropped the connection, or reported itself busy/unavailable."""


class RequestTimeoutError(RetriableError):
    """A request got no response within the request timeout."""


class UnansweredError(BrokerUnavailableError):
    """A broker dropped the connection after a request was written and before it answered: the
    broker may have carried the request out."""


class SendOutcomeUnknownError(RetriableError):
    """A send was written but never answered (timeout, dropped connection): the broker may have
    stored it. Not retried in place, where a stored send would be stored twice; the batch fails and
    its re-run leaves out what the broker did store (activities.source_runner's already-sent keys)."""


class TopicNotFoundError(RocketMQError):
    """The name server or broker does not know the topic (topic auto-creation is off)."""

    def __init__(self, topic: str, detail: str = "") -> None:
        self.topic = topic
        super().__init__(f"rocketmq: topic {topic!r} does not exist{': ' + detail if detail else ''}")


class AuthError(RocketMQError):
    """The broker or name server refused the request's credentials or permissions."""


class MessageTooLargeError(RocketMQError):
    """A message (or its properties) exceeds what the broker accepts."""


class OffsetOutOfRangeError(RocketMQError):
    """A pull asked for an offset the queue does not hold (below min: data loss; above max)."""

    def __init__(self, mq: MessageQueue, requested: int, min_offset: int, max_offset: int) -> None:
        self.mq = mq
        self.requested = requested
        self.min_offset = min_offset
        self.max_offset = max_offset
        where = "below the earliest retained" if requested < min_offset else "beyond the latest"
        super().__init__(
            f"rocketmq: offset {requested} of topic {mq.topic!r} queue {mq.broker_name}:{mq.queue_id} is "
            f"{where} offset (queue holds [{min_offset}, {max_offset}))"
        )


class SkippedOffsetsError(RetriableError):
    """A pull's next offset passed messages the pull did not return, and looking again did not bring
    them: the queue indexes messages its broker could not read (a commit log file removed under it,
    e.g. cleaned for disk space). Never read past in silence: the range would lose them."""

    def __init__(self, mq: MessageQueue, start: int, end: int) -> None:
        self.mq = mq
        self.start = start
        self.end = end
        super().__init__(
            f"rocketmq: the broker skipped offsets [{start}, {end}) of topic {mq.topic!r} queue "
            f"{mq.broker_name}:{mq.queue_id}: it indexes them but returned none (commit log removed?)"
        )


class ProtocolError(RocketMQError):
    """Bytes on the wire do not follow the remoting protocol or the message layout."""
