"""Change data capture: what every log-based source shares (the Debezium envelope, topic names)."""

from typing import Final

from sluice.connectors.config import ConfigField, idle_backoff_field

#: Change-log sources keep polling every ``poll.interval.ms`` while idle: a Debezium user expects a
#: change within a second of its commit, however quiet the database was before.
LOG_IDLE_BACKOFF: Final[ConfigField] = idle_backoff_field(
    0, "none for a change log, so a change after a quiet spell is read within poll.interval.ms"
)
