"""Sluice's own RocketMQ client over the remoting protocol (see docs/design.md for why).

Import cost is small (no pyspark); ``RocketMQClient`` is asyncio, ``SyncRocketMQClient`` blocks.
"""

from sluice.connectors.rocketmq.client import RocketMQClient
from sluice.connectors.rocketmq.errors import (
    AuthError,
    BrokerUnavailableError,
    MessageTooLargeError,
    NameServerUnavailableError,
    OffsetOutOfRangeError,
    ProtocolError,
    RequestTimeoutError,
    RetriableError,
    RocketMQError,
    TopicNotFoundError,
)
from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.connectors.rocketmq.values import (
    Message,
    MessageQueue,
    OutgoingMessage,
    PullResult,
    SendResult,
    TopicRoute,
)

__all__ = [
    "AuthError",
    "BrokerUnavailableError",
    "Message",
    "MessageQueue",
    "MessageTooLargeError",
    "NameServerUnavailableError",
    "OffsetOutOfRangeError",
    "OutgoingMessage",
    "ProtocolError",
    "PullResult",
    "RequestTimeoutError",
    "RetriableError",
    "RocketMQClient",
    "RocketMQError",
    "SendResult",
    "SyncRocketMQClient",
    "TopicNotFoundError",
    "TopicRoute",
]
