"""The whole local stack: start in dependency order, stop in reverse, report health.

`up` is idempotent (healthy services are left alone) and all-or-nothing: if a service fails to
start, the ones this call started are stopped again and the error names the service and its log.

Services start and stop in waves (``WAVES``): the services of one wave do not depend on each other
and are started together, since most of a start is waiting for a JVM or a database to answer (one
after another, a cold `up` took 48 s here and `down` 37 s).
"""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

from sluice.deploy.local import lake
from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.mariadb import MariaDB
from sluice.deploy.local.mosquitto import Mosquitto
from sluice.deploy.local.opensearch import OpenSearch
from sluice.deploy.local.postgres import Postgres
from sluice.deploy.local.process import StackError
from sluice.deploy.local.rocketmq import Broker, NameServer, ensure_jars, replica
from sluice.deploy.local.temporal import Temporal


class Service(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def healthy(self) -> bool: ...


SERVICE_NAMES = (
    "postgres", "mariadb", "temporal", "rocketmq-namesrv", "rocketmq-broker", "rocketmq-replica-namesrv",
    "rocketmq-replica-broker", "opensearch", "mosquitto",
)  # fmt: skip


#: Start order: a wave starts once the one before is up (a broker registers with its name server).
WAVES: tuple[tuple[str, ...], ...] = (
    (
        "postgres",
        "mariadb",
        "temporal",
        "rocketmq-namesrv",
        "rocketmq-replica-namesrv",
        "opensearch",
        "mosquitto",
    ),
    ("rocketmq-broker", "rocketmq-replica-broker"),
)


def services(cfg: StackConfig) -> dict[str, Service]:
    return {
        "postgres": Postgres(cfg),
        "mariadb": MariaDB(cfg),
        "temporal": Temporal(cfg),
        "rocketmq-namesrv": NameServer(cfg),
        "rocketmq-broker": Broker(cfg),
        "rocketmq-replica-namesrv": NameServer(cfg, replica(cfg)),
        "rocketmq-replica-broker": Broker(cfg, replica(cfg)),
        "opensearch": OpenSearch(cfg),
        "mosquitto": Mosquitto(cfg),
    }


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    healthy: bool
    address: str
    log: str


def _address(cfg: StackConfig, name: str) -> str:
    return {
        "postgres": cfg.database_url,
        "mariadb": cfg.mariadb_url(hide_password=True),
        "temporal": f"{cfg.temporal_address} (UI {cfg.temporal_ui_url})",
        "rocketmq-namesrv": cfg.namesrv_address,
        "rocketmq-broker": f"{cfg.broker_address} (gRPC proxy {cfg.proxy_address})",
        "rocketmq-replica-namesrv": cfg.replica_namesrv_address,
        "rocketmq-replica-broker": f"{cfg.replica_broker_address} (gRPC proxy {cfg.replica_proxy_address})",
        "opensearch": cfg.opensearch_url,
        "mosquitto": (
            f"{cfg.mqtt_url(hide_password=True)} "
            f"(TLS mqtts://{cfg.host}:{cfg.mqtt_tls_port}, CA {cfg.mqtt_ca_file})"
        ),
    }[name]


def up(cfg: StackConfig) -> list[ServiceStatus]:
    """Start what is not healthy, a wave at a time; each service's health is checked once before
    (healthy ones are left alone) and, when something was started, every service once more after
    (a start must not have disturbed one before it)."""
    cfg.state_dir.mkdir(parents=True, exist_ok=True)
    ensure_jars(cfg)
    lake.ensure_jars(cfg)
    every = services(cfg)
    started: list[Service] = []
    for wave in WAVES:
        idle = [(name, every[name]) for name in wave if not every[name].healthy()]
        with ThreadPoolExecutor(max_workers=max(len(idle), 1)) as pool:
            outcomes = list(zip(idle, pool.map(_start, (svc for _, svc in idle)), strict=True))
        started += [svc for (_, svc), failure in outcomes if failure is None]
        failed = [(name, failure) for (name, _), failure in outcomes if failure is not None]
        if failed:
            _stop_all(list(reversed(started)))
            name, failure = failed[0]
            if isinstance(failure, StackError):
                raise failure
            raise StackError(f"{name}: failed to start: {failure}") from failure
    if started:
        return status(cfg)
    # Every service passed its check just now: report that instead of checking them all again.
    return _report(cfg, dict.fromkeys(SERVICE_NAMES, True))


def _start(svc: Service) -> BaseException | None:
    """One service started; its failure returned, so the others of its wave finish starting and
    can be stopped again (an unexpected failure too: it must not leave a half stack)."""
    try:
        svc.start()
    except Exception as exc:  # noqa: BLE001 - returned to up(), which raises it
        return exc
    return None


def _stop_all(svcs: list[Service]) -> None:
    with ThreadPoolExecutor(max_workers=max(len(svcs), 1)) as pool:
        list(pool.map(lambda svc: svc.stop(), svcs))


#: Used share of the disk at which RocketMQ's broker refuses new messages (its warning level).
BROKER_DISK_FULL = 0.90
#: Above this share the stack warns: the broker is near refusing, and would have deleted unread
#: commit log files here (diskSpaceCleanForciblyRatio) had the stack not turned that off.
DISK_WARNING = 0.85


def disk_used_share(used_bytes: int, free_bytes: int) -> float:
    """The used share of a disk as RocketMQ's broker counts it: used / (used + what is free to
    unprivileged users), so a disk with blocks reserved for root looks fuller than ``df`` says."""
    return used_bytes / (used_bytes + free_bytes) if used_bytes + free_bytes else 0.0


def disk_warning(path: Path, used_bytes: int, free_bytes: int) -> str | None:
    """A warning naming ``path`` when its disk is nearly full, else None."""
    share = disk_used_share(used_bytes, free_bytes)
    if share < DISK_WARNING:
        return None
    return (
        f"the disk of {path} is {share:.0%} used: RocketMQ's broker refuses new messages "
        f"at {BROKER_DISK_FULL:.0%}; free some space (a benchmark's topics, `make clean-state`)"
    )


def stack_disk_warning(cfg: StackConfig) -> str | None:
    """``disk_warning`` for the stack's state folder, where the broker keeps its store."""
    usage = shutil.disk_usage(cfg.state_dir)
    return disk_warning(cfg.state_dir, usage.used, usage.free)


def down(cfg: StackConfig) -> None:
    """Stop every service, the last wave first (brokers before their name servers)."""
    every = services(cfg)
    for wave in reversed(WAVES):
        _stop_all([every[name] for name in wave])


def status(cfg: StackConfig) -> list[ServiceStatus]:
    return _report(cfg, {name: svc.healthy() for name, svc in services(cfg).items()})


def _report(cfg: StackConfig, health: dict[str, bool]) -> list[ServiceStatus]:
    result = []
    for name, svc in services(cfg).items():
        proc = getattr(svc, "proc")  # noqa: B009 - every service has one
        result.append(ServiceStatus(name, health[name], _address(cfg, name), str(proc.log_file)))
    result.append(ServiceStatus("spark", True, f"master {cfg.spark_master} (in-process, no service)", ""))
    return result


def restart_service(cfg: StackConfig, name: str) -> None:
    """Stop and start one service (fault-injection tests); waits until it is healthy again."""
    aliases = {"broker": "rocketmq-broker", "replica-broker": "rocketmq-replica-broker", "mqtt": "mosquitto"}
    name = aliases.get(name, name)
    svc = services(cfg)[name]
    svc.stop()
    svc.start()


def status_as_dicts(statuses: list[ServiceStatus]) -> list[dict[str, object]]:
    return [asdict(s) for s in statuses]
