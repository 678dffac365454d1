"""The two clusters of a replicator, from RocketMQ Connect's Replicator keys.

``src.endpoint`` / ``dest.endpoint`` are name server addresses (``host:port``, several joined by
``;``); ``src.cluster`` / ``dest.cluster`` name the cluster (new target topics are created on its
masters); ``src.acl.enable`` with ``src.access.key`` and ``src.secret.key`` (secrets: sealed in
Temporal history, redacted in every response and log) sign every request to that cluster, and the
``dest.`` ones likewise. ``<side>.cloud``, ``<side>.cluster`` and ``<side>.region`` make the label
``cloud_cluster_region`` the Replicator stamps in ``REPLICATOR-BORN-SOURCE``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from sluice.connectors.api import TargetCluster
from sluice.connectors.config import ConfigField, non_empty

if TYPE_CHECKING:
    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient


def _side_fields(side: str, what: str) -> tuple[ConfigField, ...]:
    return (
        ConfigField(
            f"{side}.endpoint", str, doc=f"name server(s) of the {what} cluster", validator=non_empty
        ),
        ConfigField(f"{side}.cluster", str, "", doc=f"the {what} cluster's name"),
        ConfigField(f"{side}.cloud", str, "", doc="part of the cluster's label (REPLICATOR-BORN-SOURCE)"),
        ConfigField(f"{side}.region", str, "", doc="part of the cluster's label (REPLICATOR-BORN-SOURCE)"),
        ConfigField(f"{side}.instanceid", str, "", doc="namespace of the cluster's topics (instance%topic)"),
        ConfigField(f"{side}.acl.enable", bool, False, doc=f"sign requests to the {what} cluster"),
        ConfigField(f"{side}.access.key", str, "", doc="ACL access key", secret=True),
        ConfigField(f"{side}.secret.key", str, "", doc="ACL secret key", secret=True),
    )


CLUSTER_FIELDS: Final = (
    *_side_fields("src", "source"),
    *_side_fields("dest", "target"),
    # the connector names its own topics (RoutesTopics): the common ``topic`` is not asked for
    ConfigField("topic", str, "", doc="not used: the replicator's keys name its topics"),
)


def _cluster(config: Mapping[str, Any], side: str) -> TargetCluster:
    signed = bool(config.get(f"{side}.acl.enable"))
    label = "_".join(str(config.get(f"{side}.{k}") or "") for k in ("cloud", "cluster", "region"))
    return TargetCluster(
        namesrv=str(config[f"{side}.endpoint"]),
        access_key=str(config.get(f"{side}.access.key") or "") if signed else "",
        secret_key=str(config.get(f"{side}.secret.key") or "") if signed else "",
        cluster=str(config.get(f"{side}.cluster") or ""),
        label=label,
        name=_name(config, side),
        keys_named=f"signed with {side}.access.key" if signed else f"unsigned: {side}.acl.enable is false",
    )


def _name(config: Mapping[str, Any], side: str) -> str:
    """How errors name the cluster: ``target cluster DR (127.0.0.1:29876)``."""
    what = "source" if side == "src" else "target"
    cluster = str(config.get(f"{side}.cluster") or "")
    return f"{what} cluster {cluster} ({config[f'{side}.endpoint']})".replace("  ", " ")


def source_cluster(config: Mapping[str, Any]) -> TargetCluster:
    return _cluster(config, "src")


def dest_cluster(config: Mapping[str, Any]) -> TargetCluster:
    return _cluster(config, "dest")


def client_of(cluster: TargetCluster) -> SyncRocketMQClient:
    """A client of ``cluster``, signing its requests when it has keys."""
    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient

    return SyncRocketMQClient(cluster.namesrv, **cluster.client_options())
