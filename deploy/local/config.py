"""Where every service of the local stack listens and keeps its state.

One frozen value, read once from the environment, so the stack scripts, the runtime and the tests
agree on ports without passing them around. Every port can be overridden with an environment
variable; everything binds to 127.0.0.1 only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(os.path.abspath(__file__)).parents[2]


def _port(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        port = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a port number") from None
    if not 0 < port < 65536:
        raise ValueError(f"{name}={port} is outside 1..65535")
    return port


@dataclass(frozen=True)
class StackConfig:
    """Addresses and state folder of the local stack (see README, 'Configuration')."""

    state_dir: Path
    pg_port: int
    temporal_port: int
    temporal_ui_port: int
    namesrv_port: int
    broker_port: int
    proxy_port: int
    spark_master: str
    host: str = "127.0.0.1"
    pg_user: str = "sluice"
    pg_database: str = "sluice"
    temporal_namespace: str = "default"

    @classmethod
    def from_env(cls) -> StackConfig:
        state = Path(os.environ.get("SLUICE_STATE_DIR") or REPO_ROOT / ".sluice")
        return cls(
            state_dir=state.resolve(),
            pg_port=_port("SLUICE_PG_PORT", 15432),
            temporal_port=_port("SLUICE_TEMPORAL_PORT", 17233),
            temporal_ui_port=_port("SLUICE_TEMPORAL_UI_PORT", 18233),
            namesrv_port=_port("SLUICE_NAMESRV_PORT", 19876),
            broker_port=_port("SLUICE_BROKER_PORT", 10911),
            proxy_port=_port("SLUICE_PROXY_PORT", 18081),
            spark_master=os.environ.get("SLUICE_SPARK_MASTER") or "local[2]",
        )

    @property
    def database_url(self) -> str:
        """SQLAlchemy URL of the offset store (psycopg 3 driver)."""
        return f"postgresql+psycopg://{self.pg_user}@{self.host}:{self.pg_port}/{self.pg_database}"

    @property
    def temporal_address(self) -> str:
        return f"{self.host}:{self.temporal_port}"

    @property
    def temporal_ui_url(self) -> str:
        return f"http://{self.host}:{self.temporal_ui_port}"

    @property
    def namesrv_address(self) -> str:
        return f"{self.host}:{self.namesrv_port}"

    @property
    def broker_address(self) -> str:
        return f"{self.host}:{self.broker_port}"

    @property
    def proxy_address(self) -> str:
        return f"{self.host}:{self.proxy_port}"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"
