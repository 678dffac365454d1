"""``make bench-mqtt``: MQTT → RocketMQ and RocketMQ → MQTT against the broker alone, in one run.

One worker in this process, the local stack's Mosquitto and RocketMQ. Four measurements:

1. **Baseline**: a plain subscriber (QoS 1, paho) receives N messages a publisher sends as fast as the
   broker takes them: messages/s from the first publish to the last delivery.
2. **mqtt-source**: the same publisher, the same N messages, into a subscribed ``mqtt-source``:
   messages/s from the first publish to the last message stored in RocketMQ. Target ≥ 0.5× (1).
3. **Latency** at a steady 10,000 msgs/s, QoS 1, for 10 s, published by Mosquitto's ``mosquitto_pub``
   (Debian's ``mosquitto-clients``, installed when missing): each message carries the time it was
   handed to the publisher; p50/p99 from then to its store in RocketMQ. Target p99 ≤ 1 s.
4. **mqtt-sink**: N messages in a RocketMQ topic published to MQTT by an ``mqtt-sink``, counted by a
   subscriber, against the publisher alone (printed, no target).

Last line: ``bench mqtt: …``.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sluice.activities.context import RuntimeContext
from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.connectors.rocketmq.values import OutgoingMessage
from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.process import apt_install
from sluice.deploy.local.rocketmq import CLUSTER_NAME
from sluice.worker.client import SluiceClient
from sluice.worker.main import build_worker, store_listener
from sluice.worker.settings import settings_or_exit
from sluice.worker.temporal_client import connect

BODY = b"x" * 100
OUTSTANDING = 1_000  # paho scans its whole queue on every PUBACK (connectors.mqtt.sink)
MOSQUITTO_PUB = Path("/usr/bin/mosquitto_pub")
RATE = 10_000  # messages/s
SECONDS = 10


def _client(cfg: StackConfig, client_id: str = "", on_message: Any = None) -> Any:
    import paho.mqtt.client as paho

    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=paho.MQTTv5)
    client.username_pw_set(cfg.mqtt_user, cfg.mqtt_password)
    client.max_inflight_messages_set(1000)
    client.max_queued_messages_set(0)
    if on_message is not None:
        client.on_message = on_message
    client.connect(cfg.host, cfg.mqtt_port)
    client.loop_start()
    while not client.is_connected():
        time.sleep(0.01)
    return client


def _ensure_mosquitto_pub() -> None:
    if not MOSQUITTO_PUB.exists():
        apt_install("bench-mqtt", "mosquitto-clients", "mosquitto")


def _send(client: Any, topic: str, payload: bytes, pending: deque[Any]) -> None:
    """One QoS 1 publish, with at most OUTSTANDING waiting for their PUBACK (paho refuses a publish
    whose 16-bit packet id is still outstanding, and drops it)."""
    if len(pending) >= OUTSTANDING:
        pending.popleft().wait_for_publish(120)
    info = client.publish(topic, payload, qos=1)
    assert info.rc == 0, f"publish refused: {info.rc}"
    pending.append(info)


def _drain(pending: deque[Any]) -> None:
    while pending:
        info = pending.popleft()
        info.wait_for_publish(120)
        assert info.is_published()


def _publish(client: Any, topic: str, count: int) -> float:
    """Publish ``count`` QoS 1 messages as fast as the broker acknowledges; the start time."""
    started, pending = time.perf_counter(), deque[Any]()
    for _ in range(count):
        _send(client, topic, BODY, pending)
    _drain(pending)
    return started


def _total(admin: SyncRocketMQClient, topic: str) -> int:
    return sum(admin.max_offset(mq) for mq in admin.queues(topic))


def plain_subscriber(cfg: StackConfig, count: int) -> float:
    """Messages/s the broker delivers to a plain QoS 1 subscriber."""
    topic = f"bench/{uuid.uuid4().hex[:8]}"
    done, received, last = threading.Event(), [0], [0.0]

    def got(_c: Any, _u: Any, _m: Any) -> None:
        received[0] += 1
        if received[0] == count:
            last[0] = time.perf_counter()
            done.set()

    sub = _client(cfg, on_message=got)
    sub.subscribe(topic, qos=1)
    time.sleep(0.5)
    pub = _client(cfg)
    started = _publish(pub, topic, count)
    done.wait(300)
    for c in (sub, pub):
        c.loop_stop()
        c.disconnect()
    return count / (last[0] - started)


def _source(cfg: StackConfig, topic_filter: str, topic: str) -> dict[str, str]:
    return {
        "connector.class": "mqtt-source", "mqtt.broker.url": f"tcp://{cfg.host}:{cfg.mqtt_port}",
        "mqtt.username": cfg.mqtt_user, "mqtt.password": cfg.mqtt_password, "mqtt.topics": topic_filter,
        "topic": topic, "value.converter": "bytes", "batch.max.records": "20000",
    }  # fmt: skip


async def _subscribed(pub: Any, admin: SyncRocketMQClient, mqtt_topic: str, topic: str) -> None:
    while True:
        pub.publish(mqtt_topic, b"probe", qos=1).wait_for_publish(10)
        await asyncio.sleep(0.3)
        if _total(admin, topic):
            return


def _latencies(admin: SyncRocketMQClient, topic: str) -> list[float]:
    out = []
    for mq in admin.queues(topic):
        for m in admin.pull_range(mq, 0, admin.max_offset(mq), max_per_request=512):
            if m.body.startswith(b"t="):
                out.append(m.store_timestamp_ms / 1000 - float(m.body[2:].decode()))
    return out


async def run(count: int) -> None:
    settings = settings_or_exit().model_copy(
        update={
            "task_queue": f"bench-{uuid.uuid4().hex[:8]}",
            "store_schema": f"bench_{uuid.uuid4().hex[:8]}",
        }
    )
    cfg = settings.stack
    ctx = RuntimeContext(settings.runtime)
    admin = SyncRocketMQClient(cfg.namesrv_address)
    name = uuid.uuid4().hex[:8]
    _ensure_mosquitto_pub()
    plain = plain_subscriber(cfg, count)
    client = await connect(settings.temporal_address, settings.temporal_namespace)
    with ThreadPoolExecutor(max_workers=8) as pool, store_listener(ctx):
        async with build_worker(client, settings, ctx, pool):
            sluice = SluiceClient(client, settings.task_queue)
            pub = _client(cfg)
            # 2. mqtt-source at full speed
            topic = f"bench_mqtt_{name}"
            admin.create_topic(topic, queue_count=4, cluster=CLUSTER_NAME)
            await sluice.create(f"bench-mqtt-{name}", _source(cfg, f"bench/{name}/#", topic))
            await _subscribed(pub, admin, f"bench/{name}/probe", topic)
            base = _total(admin, topic)
            started = await asyncio.to_thread(_publish, pub, f"bench/{name}/data", count)
            while _total(admin, topic) < base + count:
                await asyncio.sleep(0.02)
            source_rate = count / (time.perf_counter() - started)
            await sluice.delete(f"bench-mqtt-{name}")
            # 3. latency at a steady rate
            live = f"bench_mqtt_lag_{name}"
            admin.create_topic(live, queue_count=4, cluster=CLUSTER_NAME)
            await sluice.create(f"bench-mqtt-lag-{name}", _source(cfg, f"lag/{name}/#", live))
            await _subscribed(pub, admin, f"lag/{name}/probe", live)
            base = _total(admin, live)

            def steady() -> int:
                """Publish RATE msgs/s for SECONDS with Mosquitto's own C client (a Python client
                tops out below the rate on this machine): each line is a message carrying the
                time it was written."""
                feeder = subprocess.Popen(
                    [str(MOSQUITTO_PUB), "-h", cfg.host, "-p", str(cfg.mqtt_port), "-u", cfg.mqtt_user,
                     "-P", cfg.mqtt_password, "-t", f"lag/{name}/d", "-q", "1", "-l", "-M", "1000",
                     "-V", "5"],
                    stdin=subprocess.PIPE,
                )  # fmt: skip
                assert feeder.stdin is not None
                sent, t0 = 0, time.perf_counter()
                while sent < RATE * SECONDS:
                    due = min(int((time.perf_counter() - t0) * RATE), RATE * SECONDS)
                    if due <= sent:
                        time.sleep(0.001)
                        continue
                    now = f"t={time.time():.6f}\n".encode()
                    feeder.stdin.write(now * (due - sent))
                    feeder.stdin.flush()
                    sent = due
                rate = int(RATE * SECONDS / (time.perf_counter() - t0))
                feeder.stdin.close()
                assert feeder.wait(120) == 0, "mosquitto_pub failed"
                return rate

            offered = await asyncio.to_thread(steady)
            while _total(admin, live) < base + RATE * SECONDS:
                await asyncio.sleep(0.1)
            await sluice.delete(f"bench-mqtt-lag-{name}")
            # 4. mqtt-sink against the publisher alone
            out = f"bench_mqtt_out_{name}"
            admin.create_topic(out, queue_count=4, cluster=CLUSTER_NAME)
            for mq in admin.queues(out):
                for _ in range(0, count // 4, 1000):
                    admin.send_batch(mq, [OutgoingMessage(BODY, keys=f"k{i % 50}") for i in range(1000)])
            received, done = [0], threading.Event()

            def got(_c: Any, _u: Any, _m: Any) -> None:
                received[0] += 1
                if received[0] == count:
                    done.set()

            sub = _client(cfg, on_message=got)
            sub.subscribe(f"out/{name}/#", qos=1)
            time.sleep(0.5)
            started = time.perf_counter()
            await sluice.create(f"bench-mqtt-sink-{name}", {
                "connector.class": "mqtt-sink", "mqtt.broker.url": f"tcp://{cfg.host}:{cfg.mqtt_port}",
                "mqtt.username": cfg.mqtt_user, "mqtt.password": cfg.mqtt_password, "topics": out,
                "mqtt.topic": f"out/{name}/" + "${key}", "value.converter": "bytes",
                "key.converter": "string", "batch.max.records": "20000",
            })  # fmt: skip
            await asyncio.to_thread(done.wait, 300)
            sink_rate = count / (time.perf_counter() - started)
            await sluice.delete(f"bench-mqtt-sink-{name}")
            alone_started = await asyncio.to_thread(_publish, pub, f"alone/{name}", count)
            alone = count / (time.perf_counter() - alone_started)
            for c in (sub, pub):
                c.loop_stop()
                c.disconnect()
    lat = sorted(_latencies(admin, live))
    p50, p99 = statistics.median(lat), lat[int(len(lat) * 0.99) - 1]
    admin.close()
    ctx.close()
    print(f"plain subscriber: {count:,} QoS 1 messages at {plain:,.0f} msgs/s")
    print(f"mqtt-source: {count:,} messages into RocketMQ at {source_rate:,.0f} msgs/s")
    print(f"latency at {offered:,} msgs/s for {SECONDS} s: p50 {p50 * 1e3:.0f} ms, p99 {p99 * 1e3:.0f} ms")
    print(f"mqtt-sink: {count:,} messages published at {sink_rate:,.0f} msgs/s; publisher alone {alone:,.0f}")
    print(
        f"bench mqtt: source_msgs_per_s={source_rate:.0f} plain_subscriber_msgs_per_s={plain:.0f} "
        f"ratio_vs_plain={source_rate / plain:.3f} lag_p50_ms={p50 * 1000:.0f} lag_p99_ms={p99 * 1000:.0f} "
        f"lag_rate_msgs_per_s={offered} sink_msgs_per_s={sink_rate:.0f} "
        f"publisher_alone_msgs_per_s={alone:.0f} messages={count}"
    )


def main() -> None:
    asyncio.run(run(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000))


if __name__ == "__main__":
    main()
