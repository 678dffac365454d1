"""RocketMQ's own Java benchmark producer and consumer (rocketmq-example 5.5.0), bounded runs.

They print a line per report interval (``-ri`` ms): ``... Send TPS: N | ...`` and
``... Consume TPS: N | ...``, each an average over the last ten one-second snapshots. The producer is
bounded by a message count (``-q``); the consumer runs forever, so it is stopped by a timeout and its
captured output parsed. The reported rate is the best reporting window, which excludes JVM start-up
and the consumer's idle tail once it has caught up.
"""

from __future__ import annotations

import re
import subprocess

from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.rocketmq import java_tool

PRODUCER = "org.apache.rocketmq.example.benchmark.Producer"
CONSUMER = "org.apache.rocketmq.example.benchmark.Consumer"
_SEND_TPS = re.compile(r"Send TPS: (\d+)")
_CONSUME_TPS = re.compile(r"Consume TPS: (\d+)")


class JavaBenchError(RuntimeError):
    """A Java benchmark run printed no rate (it failed to start or to reach the broker)."""


def _output(cfg: StackConfig, main_class: str, args: list[str], timeout_s: float) -> str:
    try:
        done = java_tool(cfg, main_class, *args, timeout_s=timeout_s)
        return done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:  # expected for the consumer: it never exits
        parts = [exc.stdout, exc.stderr]
        return "".join(p.decode(errors="replace") if isinstance(p, bytes) else (p or "") for p in parts)


def _best(pattern: re.Pattern[str], text: str, what: str) -> float:
    rates = [int(m) for m in pattern.findall(text)]
    if not rates:
        raise JavaBenchError(f"java {what} benchmark printed no rate; output tail: {text[-600:]!r}")
    return float(max(rates))


def producer_tps(
    cfg: StackConfig, topic: str, *, body_size: int, messages: int, threads: int, timeout_s: float
) -> float:
    args = ["-n", cfg.namesrv_address, "-t", topic, "-s", str(body_size), "-w", str(threads)]
    args += ["-q", str(messages), "-ri", "1000"]
    return _best(_SEND_TPS, _output(cfg, PRODUCER, args, timeout_s), "producer")


def consumer_tps(cfg: StackConfig, topic: str, *, group: str, run_s: float) -> float:
    args = ["-n", cfg.namesrv_address, "-t", topic, "-g", group, "-w", "8", "-ri", "1000"]
    return _best(_CONSUME_TPS, _output(cfg, CONSUMER, args, run_s), "consumer")
