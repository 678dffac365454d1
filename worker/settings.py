"""The one settings object of a process: every ``SLUICE_*`` environment variable, read once.

Why one object: the stack scripts, the worker, the CLI, the benches and the tests must agree on
ports and addresses, and a bad value must be refused once, up front, with the variable's name —
not deep inside a connection attempt. Nothing else in Sluice reads ``SLUICE_*`` variables;
everything asks :func:`settings`. Defaults are the local stack (docs/configuration.md,
"Configuration reference"); the addresses of the runtime's services default from the local stack's ports, so
moving a port moves its address too.

A subprocess (a test's worker) reads its own environment once, so tests configure workers by
passing environment variables; in-process code that needs other values builds them with
``Settings(field=...)`` (addresses derive from the given ports) or
``settings().model_copy(update=...)`` (nothing re-derived: for names such as the task queue).
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sluice.activities.context import RuntimeSettings
from sluice.deploy.local import lake
from sluice.deploy.local.config import REPO_ROOT, StackConfig

ENV_PREFIX: Final = "SLUICE_"
Port = Annotated[int, Field(ge=1, le=65535)]


class SettingsError(ValueError):
    """The environment holds a bad value; the message names every bad variable (never a secret)."""


def _local_stack(data: dict[str, Any]) -> StackConfig:
    return StackConfig(
        state_dir=data["state_dir"],
        pg_port=data["pg_port"],
        temporal_port=data["temporal_port"],
        temporal_ui_port=data["temporal_ui_port"],
        namesrv_port=data["namesrv_port"],
        broker_port=data["broker_port"],
        proxy_port=data["proxy_port"],
        mariadb_port=data["mariadb_port"],
        replica_namesrv_port=data["replica_namesrv_port"],
        replica_broker_port=data["replica_broker_port"],
        replica_proxy_port=data["replica_proxy_port"],
        opensearch_port=data["opensearch_port"],
        mqtt_port=data["mqtt_port"],
        mqtt_tls_port=data["mqtt_tls_port"],
        spark_master=data["spark_master"],
        temporal_namespace=data["temporal_namespace"],
    )


def _listed(value: str | None) -> list[str]:
    return [p.strip() for p in (value or "").split(",") if p.strip()]


def _local(address: Callable[[StackConfig], str]) -> Callable[[dict[str, Any]], str]:
    """Default of an address setting: the local stack's, from the values validated before it.

    Fields validate in declaration order, so the ports are known here; if one of them was bad,
    pydantic does not call this and the port's own error is what the user sees.
    """
    return lambda data: address(_local_stack(data))


class Settings(BaseSettings):
    """Every setting Sluice reads; the environment variable is ``SLUICE_`` + the upper-cased field."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_ignore_empty=True, frozen=True)

    # The local stack (sluice stack up|down|status, tests, demo, benches).
    state_dir: Path = REPO_ROOT / ".sluice"
    pg_port: Port = 15432
    temporal_port: Port = 17233
    temporal_ui_port: Port = 18233
    namesrv_port: Port = 19876
    broker_port: Port = 10911
    proxy_port: Port = 18081
    mariadb_port: Port = 13306
    opensearch_port: Port = 19200  # HTTP; the node's transport port is this + 100
    #: The local stack's second RocketMQ cluster (the replicator's target; docs/replicator.md).
    replica_namesrv_port: Port = 29876
    replica_broker_port: Port = 20911
    replica_proxy_port: Port = 28081
    #: The local stack's MQTT broker (Mosquitto; docs/mqtt.md): plain MQTT and MQTT over TLS.
    mqtt_port: Port = 11883
    mqtt_tls_port: Port = 18883
    spark_master: str = Field(default="local[2]", min_length=1)
    spark_driver_memory: str = Field(default="2g", pattern=r"(?i)^\d+([kmgtp]b?)?$")
    #: Jars for the worker's SparkSession, comma-separated files or folders (every ``*.jar`` in
    #: them): the lake formats for delta-sink and iceberg-sink. Unset: the local stack's lake jars
    #: (deploy.local.lake), when `sluice stack up` fetched them.
    spark_jars: str | None = None
    #: Spark tasks one side of one batch may run at once: a table read in splits, a sink batch over
    #: several queues. 1 on the local stack, where a pipeline's source and sink batches already run
    #: side by side on its two cores (measured: two tasks per side starved the other side's small
    #: batches, first row 3 s -> 8 s); a cluster sets its executors' cores.
    batch_tasks: int = Field(default=1, ge=1)
    #: The most records a batch may span to run in the worker's own process, with no Spark job: the
    #: same stages, run here (a sink batch pulled, decoded, transformed and written; a source batch
    #: read, encoded and sent). Faster than a Spark job at every size measured on the local stack
    #: (docs/performance.md); 0 runs every batch on Spark, so a cluster's executors do the work.
    local_batch_max_records: int = Field(default=100_000, ge=0)
    # Where the worker and clients find the services; the local stack unless set.
    temporal_namespace: str = Field(default="default", min_length=1)
    temporal_address: str = Field(default_factory=_local(lambda s: s.temporal_address), min_length=1)
    task_queue: str = Field(default="sluice", min_length=1)
    database_url: str = Field(default_factory=_local(lambda s: s.database_url), min_length=1)
    store_schema: str = Field(default="sluice", min_length=1)
    namesrv: str = Field(default_factory=_local(lambda s: s.namesrv_address), min_length=1)
    max_tasks: int = Field(default=8, ge=1)
    #: Run the connector workflows in Temporal's sandbox in the worker too. The tests always do
    #: (tests/workflows), which is where a non-deterministic call would be caught; in the worker
    #: the sandbox more than doubles each replay's CPU (a takeover is 100 replays: docs/scaling.md).
    workflow_sandbox: bool = False
    #: `sluice worker` serves Prometheus metrics and /healthz here (worker.metrics_server); 0 takes
    #: any free port (tests). Loopback only unless asked: a cluster sets 0.0.0.0.
    metrics_host: str = Field(default="127.0.0.1", min_length=1)
    metrics_port: int = Field(default=9464, ge=0, le=65535)
    payload_key: SecretStr | None = None
    #: Fernet key sealing literal secrets of connector configs (connectors.sealing); unset: the
    #: local key file ``<state_dir>/secrets.key``, created on first use.
    secrets_key: SecretStr | None = None
    # `sluice rest` (worker/rest): RocketMQ Connect's port, loopback only unless asked.
    rest_host: str = Field(default="127.0.0.1", min_length=1)
    rest_port: Port = 8082
    rest_token: SecretStr | None = None  # bearer token for mutating calls (and reads, see below)
    rest_auth_reads: bool = False  # reads need the token too
    rest_max_body_bytes: int = Field(default=1_048_576, ge=1)

    @field_validator("state_dir")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        return value.resolve()

    @field_validator("payload_key", "secrets_key")
    @classmethod
    def _fernet_key(cls, value: SecretStr | None) -> SecretStr | None:
        """Refuse a malformed key at start, not at the first encrypted payload."""
        if value is None:
            return None
        try:
            ok = len(base64.urlsafe_b64decode(value.get_secret_value().encode())) == 32
        except (binascii.Error, ValueError):
            ok = False
        if not ok:
            raise ValueError("expected a Fernet key, 32 url-safe base64-encoded bytes (`sluice keygen`)")
        return value

    @field_validator("spark_jars")
    @classmethod
    def _jars_exist(cls, value: str | None) -> str | None:
        missing = [p for p in _listed(value) if not Path(p).exists()]
        if missing:
            raise ValueError(f"no such file or folder: {', '.join(missing)}")
        return value

    def spark_jar_files(self) -> tuple[str, ...]:
        """The jar files ``spark_jars`` names (folders expanded, sorted), or the local stack's."""
        places = [Path(p) for p in _listed(self.spark_jars)] or [lake.jar_dir(self.state_dir)]
        files: list[str] = []
        for place in places:
            files += sorted(str(j) for j in place.glob("*.jar")) if place.is_dir() else [str(place)]
        return tuple(f for f in files if Path(f).exists())

    @property
    def stack(self) -> StackConfig:
        """The local stack these settings describe."""
        return _local_stack(dict(self))

    @property
    def runtime(self) -> RuntimeSettings:
        """What the task activities need (activities.context.RuntimeContext)."""
        return RuntimeSettings(
            database_url=self.database_url,
            namesrv=self.namesrv,
            spark_master=self.spark_master,
            spark_driver_memory=self.spark_driver_memory,
            batch_tasks=self.batch_tasks,
            local_batch_max_records=self.local_batch_max_records,
            spark_jars=self.spark_jar_files(),
            store_schema=self.store_schema,
            sealing_key=self.sealing_key(),
        )

    def sealing_key(self) -> bytes:
        """The key sealing connector secrets: ``SLUICE_SECRETS_KEY``, else the local key file.

        Clients and workers must share it; on one machine (the local stack) the key file in the
        state folder does that by itself, elsewhere set ``SLUICE_SECRETS_KEY`` everywhere.
        """
        if self.secrets_key is not None:
            return self.secrets_key.get_secret_value().encode()
        path = self.state_dir / "secrets.key"
        if not path.exists():
            from cryptography.fernet import Fernet  # cryptography (~7 ms): the CLI imports this module

            # Written aside, then linked into place: two processes starting at once agree on one key.
            path.parent.mkdir(parents=True, exist_ok=True)
            draft = path.with_name(f".secrets.key.{os.getpid()}")
            draft.write_bytes(Fernet.generate_key())
            draft.chmod(0o600)
            try:
                os.link(draft, path)
            except FileExistsError:
                pass
            finally:
                draft.unlink()
        return path.read_bytes().strip()

    @property
    def max_concurrent_tasks(self) -> int:
        """Task activities one worker runs at once (``SLUICE_MAX_TASKS``), by the worker's name for it."""
        return self.max_tasks


def env_name(field: str) -> str:
    return f"{ENV_PREFIX}{field.upper()}"


def _bounds(field: str) -> str:
    metadata = Settings.model_fields[field].metadata
    low = next((m.ge for m in metadata if getattr(m, "ge", None) is not None), None)
    high = next((m.le for m in metadata if getattr(m, "le", None) is not None), None)
    return f"an integer in {low}..{high}" if high is not None else f"an integer >= {low}"


_EXPECTED: Final[dict[str, Callable[[str], str]]] = {
    "int_parsing": lambda field: "expected an integer",
    "greater_than_equal": lambda field: f"expected {_bounds(field)}",
    "less_than_equal": lambda field: f"expected {_bounds(field)}",
    "string_too_short": lambda field: "expected a non-empty value",
    "string_pattern_mismatch": lambda field: "expected a size such as 512m or 2g",
}
_SECRET_FIELDS: Final = frozenset({"payload_key", "secrets_key", "rest_token"})


def _problem(error: Any) -> str:
    """One bad variable, in words: its name, what was expected and (unless secret) what was given."""
    field = str(error["loc"][0])
    if error["type"] in _EXPECTED:
        expected = _EXPECTED[error["type"]](field)
    elif error["type"] == "value_error":  # our own validators' messages
        expected = str(error["ctx"]["error"])
    else:
        expected = str(error["msg"]).lower()
    if field in _SECRET_FIELDS:
        return f"{env_name(field)}: {expected}"
    return f"{env_name(field)}: {expected}, got {error['input']!r}"


def load_settings() -> Settings:
    """Read the environment now; a bad value raises :class:`SettingsError` naming its variable."""
    try:
        return Settings()
    except ValidationError as exc:
        # An address left unset is not a problem of its own when the port it derives from is bad.
        problems = [_problem(e) for e in exc.errors() if e["type"] != "default_factory_not_called"]
        raise SettingsError("invalid environment: " + "; ".join(problems)) from None


@functools.cache
def settings() -> Settings:
    """The process's settings, read from the environment on first use (``settings.cache_clear()``
    makes the next call read it again, for tests that change the environment)."""
    return load_settings()


def settings_or_exit() -> Settings:
    """For command-line entry points: a bad environment is one line on stderr and exit status 1."""
    try:
        return settings()
    except SettingsError as exc:
        raise SystemExit(f"sluice: {exc}") from None
