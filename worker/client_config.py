"""The client's typed config object and where it finds its keys (light: standard library only)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ConnectorConfig:
    """A connector config, typed where every connector agrees; ``settings`` holds the rest
    (``{"file": …, "topic": …}``). ``create`` also takes the flat ``dict[str, str]`` directly."""

    connector_class: str
    settings: Mapping[str, str] = field(default_factory=dict)
    tasks_max: int | None = None

    def to_dict(self) -> dict[str, str]:
        out = {"connector.class": self.connector_class, **self.settings}
        if self.tasks_max is not None:
            out["tasks.max"] = str(self.tasks_max)
        return out


ConfigLike = ConnectorConfig | Mapping[str, str]


def flat(config: ConfigLike) -> dict[str, str]:
    return config.to_dict() if isinstance(config, ConnectorConfig) else dict(config)


def env_key(variable: str, key_file: str | None = None) -> bytes | None:
    """A Fernet key from ``$variable``, else from ``$SLUICE_STATE_DIR/key_file`` when that exists."""
    value = os.environ.get(variable, "").strip()
    if value:
        return value.encode()
    state_dir = os.environ.get("SLUICE_STATE_DIR", "").strip()
    if key_file and state_dir and (Path(state_dir) / key_file).is_file():
        return (Path(state_dir) / key_file).read_bytes().strip()
    return None
