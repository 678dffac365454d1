"""`make demo-mqtt` on the real stack, small (5 devices × 100 readings): a real `sluice worker`,
Mosquitto, RocketMQ, PostgreSQL. The demo's verdict is EQUAL, and an MQTT subscriber of the test's own
(a witness, independent of the demo's bookkeeping) received exactly the payloads the table holds,
row for row. About 25 s, most of it the worker's start. And the proof itself, on a table the test
writes: EQUAL for the published readings, and each missing, extra or altered row named by device
and sequence number.
"""

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import inspect, text

from sluice.deploy.local.config import StackConfig
from sluice.worker.demo.mqtt import FleetSize, Reading, main, print_verdict, prove
from sluice.worker.demo.shop import connect_url
from tests.databases import TestDatabase

DEVICES, READINGS = 5, 100


def _readings() -> list[Reading]:
    t0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    return [
        Reading(f"d{d}", s, round(20 + d + s / 7, 2), t0 + timedelta(seconds=s, microseconds=d * 1001))
        for d in range(3)
        for s in range(10)
    ]


def test_proof_names_each_difference_by_device_and_seq(
    postgres_db: TestDatabase, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = connect_url(postgres_db.url)
    readings = _readings()
    try:
        assert prove(readings, engine, "telemetry").problem == "the table does not exist in PostgreSQL"
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE telemetry (device text, seq bigint, temp double precision, "
                              "ts timestamptz, PRIMARY KEY (device, seq))"))  # fmt: skip
            conn.execute(
                text("INSERT INTO telemetry VALUES (:device, :seq, :temp, :ts)"),
                [{"device": r.device, "seq": r.seq, "temp": r.temp, "ts": r.ts} for r in readings],
            )
        equal = prove(readings, engine, "telemetry")
        assert equal.equal and (equal.source_rows, equal.target_rows) == (30, 30), equal.summary()
        assert equal.columns == ["device", "seq", "temp", "ts"] and "30 rows × 4 columns" in equal.summary()
        with engine.begin() as conn:
            conn.execute(text("UPDATE telemetry SET temp = temp + 0.01 WHERE device = 'd1' AND seq = 4"))
            conn.execute(text("UPDATE telemetry SET ts = ts + interval '1 microsecond' "
                              "WHERE device = 'd2' AND seq = 9"))  # fmt: skip
            conn.execute(text("DELETE FROM telemetry WHERE device = 'd0' AND seq = 7"))
            conn.execute(text("INSERT INTO telemetry VALUES ('d9', 3, 1.5, now())"))
        result = prove(readings, engine, "telemetry")
        assert (result.missing, result.extra, result.differing) == (1, 1, 2), result.summary()
        examples = "\n".join(result.examples)
        assert "device=d0 seq=7: missing in the target" in examples, examples
        assert "device=d9 seq=3: in the target only" in examples, examples
        assert re.search(r"device=d1 seq=4: temp: '\d+\.\d+' != '\d+\.\d+'", examples), examples
        assert "device=d2 seq=9: ts:" in examples, examples
        capsys.readouterr()
        assert not print_verdict(result, FleetSize(3, 10), "iot.telemetry")
        out = capsys.readouterr().out
        assert "telemetry: DIFFERENT — source 30 rows, target 30; 1 missing, 1 extra, 2 differing" in out, out
        assert (
            "VERDICT: the readings 3 devices published over MQTT and PostgreSQL iot.telemetry are "
            "NOT EQUAL (30 readings, 30 rows)" in out
        ), out
    finally:
        engine.dispose()


@pytest.fixture
def witness(stack_config: StackConfig) -> Iterator[list[tuple[str, bytes]]]:
    """Every message published to ``demo/#`` while the test runs, as (MQTT topic, payload)."""
    import paho.mqtt.client as paho

    received: list[tuple[str, bytes]] = []
    client = paho.Client(paho.CallbackAPIVersion.VERSION2)
    client.username_pw_set(stack_config.mqtt_user, stack_config.mqtt_password)
    client.on_message = lambda _c, _u, msg: received.append((msg.topic, bytes(msg.payload)))
    subscribed: list[Any] = []
    client.on_subscribe = lambda *args: subscribed.append(args)
    client.connect(stack_config.host, stack_config.mqtt_port)
    client.loop_start()
    client.subscribe("demo/#", qos=1)
    deadline = time.monotonic() + 10
    while not subscribed and time.monotonic() < deadline:
        time.sleep(0.05)
    assert subscribed, "the test's MQTT subscriber was not subscribed"
    yield received
    client.loop_stop()
    client.disconnect()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_demo_mqtt_ends_equal(
    stack_config: StackConfig,
    postgres_db: TestDatabase,
    witness: list[tuple[str, bytes]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    handler = signal.getsignal(signal.SIGTERM)
    try:
        code = main(["--devices", str(DEVICES), "--readings", str(READINGS), "--rate", "20",
                     "--catch-up-seconds", "120", "--database", postgres_db.name])  # fmt: skip
        out = capsys.readouterr().out
    finally:
        signal.signal(signal.SIGTERM, handler)
    total = DEVICES * READINGS
    assert "the pipeline is live after" in out, out[-3000:]
    assert f"devices: {total} readings acknowledged by the broker (QoS 1)" in out, out[-3000:]
    assert "0 publish errors" in out, out[-3000:]
    assert f"EQUAL — {total} rows × 4 columns" in out, out[-3000:]
    assert re.search(rf"VERDICT: .* are EQUAL \({total} readings, {total} rows\)", out), out[-3000:]
    assert code == 0
    assert "connectors deleted" in out

    # The witness: what the devices published (the probe reading may have gone out more than once,
    # the same payload each time) is exactly what the table holds, every column.
    found = re.search(r'"sourceTopic": "(demo/\d+)/\+/telemetry"', out)
    assert found, out[-3000:]
    prefix = found[1] + "/"
    published = {}
    for topic, payload in witness:
        if topic.startswith(prefix):
            reading = json.loads(payload)
            assert topic == f"{prefix}{reading['device']}/telemetry"
            key = (reading["device"], reading["seq"])
            assert published.setdefault(key, reading) == reading, key  # a repeat is the same payload
    assert len(published) == total
    engine = connect_url(postgres_db.url)
    try:
        (table,) = [t for t in inspect(engine).get_table_names() if t.startswith("telemetry_")]
        with engine.connect() as conn:
            rows = conn.execute(text(f'SELECT device, seq, temp, ts FROM "{table}"')).all()
    finally:
        engine.dispose()
    held = {(d, s): (t, ts) for d, s, t, ts in rows}
    sent = {k: (r["temp"], datetime.fromisoformat(r["ts"])) for k, r in published.items()}
    assert len(rows) == total and held == sent
