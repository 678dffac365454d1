"""RocketMQ throughput against the local broker: Sluice's client vs the official Python and Java clients.

Run with ``make bench-rocketmq`` (``.venv/bin/python -m bench.rocketmq_bench``); the stack must be up.
Each measurement has its own fresh topic (4 queues) and is bounded by a message count and seconds,
so the whole run stays under three minutes. Measured, in order:
1. Sluice batched send, 100-byte and 1 KiB bodies (batch requests, several in flight per queue).
2. Sluice pull of the 100-byte topic by queue offset (pull_range, requests in flight).
3. The official 5.x Python client sending 100-byte messages through the gRPC proxy (one per RPC).
4. RocketMQ's Java benchmark Producer (100-byte, 16 threads) and Consumer (push, on that topic).

The last line is a single machine-readable summary; a measurement that failed prints ``nan`` there
and the exit status is 1. Numbers depend on the machine's load: compare ratios from the same run.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
import traceback
import uuid
from collections.abc import Callable

from bench.rocketmq import java_tools, official_python, sluice_client
from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.worker.settings import settings_or_exit

BATCH = 1000
SEND_100B_MAX = (600_000, 12.0)  # (messages, seconds)
SEND_1K_MAX = (200_000, 10.0)
PULL_MAX_S = 12.0
OFFICIAL_MAX = (30_000, 12.0)
JAVA_PRODUCER_MESSAGES = 150_000
JAVA_PRODUCER_TIMEOUT_S = 45.0
JAVA_CONSUMER_RUN_S = 22.0


def _topic(client: SyncRocketMQClient, label: str) -> str:
    name = f"BENCH_{label}_{uuid.uuid4().hex[:8]}"
    client.create_topic(name, queue_count=4)
    return name


def _measure(label: str, fn: Callable[[], float], failures: list[str]) -> float:
    started = time.perf_counter()
    try:
        rate = fn()
    except Exception:  # a failed measurement is reported, the others still run
        failures.append(label)
        print(f"{label}: FAILED\n{traceback.format_exc(limit=3)}", flush=True)
        return math.nan
    print(f"{label}: {rate:,.0f} msgs/s  ({time.perf_counter() - started:.1f} s)", flush=True)
    return rate


def _fmt(value: float) -> str:
    return "nan" if math.isnan(value) else f"{value:.0f}"


def _ratio(a: float, b: float) -> str:
    return "nan" if math.isnan(a) or math.isnan(b) or b == 0 else f"{a / b:.2f}"


def main() -> int:
    cfg = settings_or_exit().stack
    failures: list[str] = []
    with SyncRocketMQClient(cfg.namesrv_address) as admin:
        t100, t1k, tpy, tjava = (_topic(admin, x) for x in ("S100", "S1K", "PY", "JAVA"))
    ns = cfg.namesrv_address

    send_100b = _measure(
        "sluice send 100 B (batched)",
        lambda: (
            asyncio.run(
                sluice_client.send(
                    ns,
                    t100,
                    body_size=100,
                    batch=BATCH,
                    max_messages=SEND_100B_MAX[0],
                    max_seconds=SEND_100B_MAX[1],
                )
            ).per_second
        ),
        failures,
    )
    send_1k = _measure(
        "sluice send 1 KiB (batched)",
        lambda: (
            asyncio.run(
                sluice_client.send(
                    ns,
                    t1k,
                    body_size=1024,
                    batch=BATCH,
                    max_messages=SEND_1K_MAX[0],
                    max_seconds=SEND_1K_MAX[1],
                )
            ).per_second
        ),
        failures,
    )
    pull_100b = _measure(
        "sluice pull 100 B (by offset)",
        lambda: asyncio.run(sluice_client.pull(ns, t100, max_seconds=PULL_MAX_S)).per_second,
        failures,
    )
    official = _measure(
        "official python 5.x send 100 B (gRPC proxy, 1 msg/RPC)",
        lambda: (
            official_python.send(
                cfg.proxy_address,
                tpy,
                body_size=100,
                max_messages=OFFICIAL_MAX[0],
                max_seconds=OFFICIAL_MAX[1],
            ).per_second
        ),
        failures,
    )
    java_send = _measure(
        "java benchmark Producer 100 B (16 threads)",
        lambda: java_tools.producer_tps(
            cfg,
            tjava,
            body_size=100,
            messages=JAVA_PRODUCER_MESSAGES,
            threads=16,
            timeout_s=JAVA_PRODUCER_TIMEOUT_S,
        ),
        failures,
    )
    java_consume = _measure(
        "java benchmark Consumer (push)",
        lambda: java_tools.consumer_tps(
            cfg, tjava, group=f"BENCH_G_{uuid.uuid4().hex[:8]}", run_s=JAVA_CONSUMER_RUN_S
        ),
        failures,
    )

    print(f"ratio sluice send / official python: {_ratio(send_100b, official)}")
    print(f"ratio sluice send / java producer:   {_ratio(send_100b, java_send)}")
    print(f"ratio sluice pull / java consumer:   {_ratio(pull_100b, java_consume)}")
    if failures:
        print(f"failed measurements: {', '.join(failures)}")
    print(
        "bench rocketmq: "
        f"send_100b_msgs_per_s={_fmt(send_100b)} send_1k_msgs_per_s={_fmt(send_1k)} "
        f"pull_100b_msgs_per_s={_fmt(pull_100b)} official_py_send_msgs_per_s={_fmt(official)} "
        f"java_send_msgs_per_s={_fmt(java_send)} java_consume_msgs_per_s={_fmt(java_consume)} "
        f"send_vs_official_py_ratio={_ratio(send_100b, official)} "
        f"send_vs_java_ratio={_ratio(send_100b, java_send)}",
        flush=True,
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
