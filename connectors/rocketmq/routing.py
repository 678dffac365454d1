"""Parsing the name server's JSON documents: topic routes and cluster membership.

The name server serialises with fastjson, which writes maps with numeric keys unquoted
(``"brokerAddrs":{0:"10.0.0.1:10911"}``) — not JSON. Route requests ask for standard JSON
(``acceptStandardJsonOnly``), but older servers and the cluster-info request ignore that, so
``loads_lenient`` quotes bare numeric keys (outside strings) before parsing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from sluice.connectors.rocketmq.errors import ProtocolError
from sluice.connectors.rocketmq.values import MessageQueue, TopicRoute

PERM_READ = 0x4
PERM_WRITE = 0x2
MASTER_ID = "0"

_BARE_KEY = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")


def loads_lenient(data: bytes, what: str) -> object:
    """Parse JSON, accepting fastjson's unquoted numeric map keys."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError(f"rocketmq: {what} is not UTF-8") from None
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return json.loads(_quote_bare_keys(text))
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"rocketmq: {what} is not valid JSON: {exc}") from None


def _quote_bare_keys(text: str) -> str:
    """Quote numeric keys in the parts of ``text`` that lie outside string literals."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        j = text.find('"', i)
        if j < 0:
            out.append(_BARE_KEY.sub(r'\1"\2"\3', text[i:]))
            break
        out.append(_BARE_KEY.sub(r'\1"\2"\3', text[i:j]))
        k = j + 1
        while k < n and text[k] != '"':
            k += 2 if text[k] == "\\" else 1
        out.append(text[j : k + 1])
        i = k + 1
    return "".join(out)


def _as_dict(value: object, what: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise ProtocolError(f"rocketmq: {what} is not a JSON object")
    return value


def _master_addresses(broker_datas: object, what: str) -> dict[str, str]:
    """Broker name -> master address, from a list (route) or dict (cluster info) of BrokerData."""
    items = broker_datas.values() if isinstance(broker_datas, dict) else broker_datas
    if not isinstance(items, (list, type({}.values()))):
        raise ProtocolError(f"rocketmq: {what} has no broker list")
    masters: dict[str, str] = {}
    for raw in items:
        bd = _as_dict(raw, what)
        name = bd.get("brokerName")
        addrs = _as_dict(bd.get("brokerAddrs") or {}, what)
        master = addrs.get(MASTER_ID)
        if isinstance(name, str) and isinstance(master, str):
            masters[name] = master
    return masters


def parse_topic_route(topic: str, body: bytes) -> TopicRoute:
    """TopicRouteData JSON -> readable (and writable) queues and broker master addresses."""
    doc = _as_dict(loads_lenient(body, f"route of topic {topic!r}"), f"route of topic {topic!r}")
    masters = _master_addresses(doc.get("brokerDatas") or [], f"route of topic {topic!r}")
    queues: list[MessageQueue] = []
    writable: list[MessageQueue] = []
    perms = 0
    queue_datas = doc.get("queueDatas")
    queue_datas = [] if queue_datas is None else queue_datas
    if not isinstance(queue_datas, list):
        raise ProtocolError(f"rocketmq: route of topic {topic!r} has no queue list")
    for raw in sorted(queue_datas, key=lambda q: str(q.get("brokerName")) if isinstance(q, dict) else ""):
        qd = _as_dict(raw, f"route of topic {topic!r}")
        name, perm = qd.get("brokerName"), qd.get("perm", 0)
        reads, writes = qd.get("readQueueNums", 0), qd.get("writeQueueNums", 0)
        if not isinstance(name, str) or not all(isinstance(v, int) for v in (perm, reads, writes)):
            raise ProtocolError(f"rocketmq: route of topic {topic!r} has a malformed queue entry {qd!r}")
        assert isinstance(perm, int) and isinstance(reads, int) and isinstance(writes, int)
        if name not in masters:
            continue  # no master: its queues cannot be read by offset from this client
        perms |= perm
        if perm & PERM_READ:
            queues += [MessageQueue(topic, name, q) for q in range(reads)]
        if perm & PERM_WRITE:
            writable += [MessageQueue(topic, name, q) for q in range(writes)]
    return TopicRoute(topic, tuple(queues), masters, tuple(writable), perms or 6)


@dataclass(frozen=True)
class ClusterInfo:
    """Which brokers belong to which cluster, and each broker's master address."""

    clusters: dict[str, tuple[str, ...]]
    masters: dict[str, str]


def parse_cluster_info(body: bytes) -> ClusterInfo:
    doc = _as_dict(loads_lenient(body, "cluster info"), "cluster info")
    masters = _master_addresses(doc.get("brokerAddrTable") or {}, "cluster info")
    clusters_raw = _as_dict(doc.get("clusterAddrTable") or {}, "cluster info")
    clusters = {
        name: tuple(sorted(str(b) for b in brokers))
        for name, brokers in clusters_raw.items()
        if isinstance(brokers, list)
    }
    return ClusterInfo(clusters, masters)
