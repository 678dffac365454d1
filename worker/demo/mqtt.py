"""`make demo-mqtt`: simulated IoT devices publish over MQTT into PostgreSQL through RocketMQ, and the
table is proved equal to what they published.

1. creates the PostgreSQL database ``iot`` if it is missing (the run's table is new: one per run);
2. starts a `sluice worker` process and creates two connectors through the Python client:
   ``mqtt-source`` with RocketMQ Connect's MQTT class and keys (``MqttSourceConnector``,
   ``mqttBrokerUrl``, ``sourceTopic`` ``demo/<run>/+/telemetry``, ``connect.topicname``; QoS 1, the
   payload as text) into one RocketMQ topic, and ``jdbc-sink`` with Confluent's class and keys: plain
   JSON read by ``value.converter.schema``, upserted by ``(device, seq)`` into a table it creates;
3. waits until the pipeline is live: the first reading of the first device is published (QoS 1)
   until it shows in PostgreSQL — the broker drops what is published before the source subscribed;
4. N devices (``paho-mqtt``, one MQTT connection each) publish M readings each at a steady rate at
   QoS 1 to ``demo/<run>/<device>/telemetry``: ``{"device", "seq", "temp", "ts"}`` JSON, with the
   live view of rows landing per second and the lag (``sluice.worker.demo.live_view``);
5. once every reading is acknowledged (PUBACK), waits for catch-up and compares every reading with
   its row by ``(device, seq)``, every column by content (``sluice.worker.demo.table_equality``):
   prints the verdict and exits 1 unless nothing is missing, extra or different.

Why upsert by ``(device, seq)``: ``mqtt-source`` delivers at least once (docs/mqtt.md): what was
in flight at a crash or a dropped connection comes again, and lands on the row it already wrote.
The MQTT topics carry the run's id, so two runs (or a test beside a user's run) never read each
other's devices.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from rich.table import Table
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import URL, Engine, make_url

from sluice.deploy.local.config import StackConfig
from sluice.worker.client import SluiceClient
from sluice.worker.demo.db import create_connectors, failed_tasks, run_on_stack, watch
from sluice.worker.demo.file import started_worker
from sluice.worker.demo.live_view import LiveView, ProgressSampler, TableSample, render
from sluice.worker.demo.shop import LoadStats, connect_url
from sluice.worker.demo.table_equality import (
    Kind,
    Row,
    TableComparison,
    canonical,
    canonical_rows,
    column_kinds,
    compare_rows,
)

if TYPE_CHECKING:
    import paho.mqtt.client as paho

DATABASE: Final = "iot"
PASSWORD_ENV: Final = "IOT_MQTT_PASSWORD"  # the broker's password reaches the worker as ${env:...}
#: A reading's fields, in the table's column order, each with the kind it compares as.
COLUMNS: Final = {"device": Kind.TEXT, "seq": Kind.INTEGER, "temp": Kind.DECIMAL, "ts": Kind.INSTANT}
VALUE_SCHEMA: Final = "device STRING, seq BIGINT, temp DOUBLE, ts TIMESTAMP"
KEY: Final = "reading"  # the proof's row number (see ``prove``), not a column of the table
ACK_WAIT_S: Final = 30  # how long the last readings in flight may wait for their PUBACK
LABEL: Final = "telemetry"  # the live view's row (the run's table name is too wide for it)


@dataclass(frozen=True)
class FleetSize:
    devices: int = 20
    readings: int = 500  # per device
    rate: float = 10.0  # readings per second, per device

    @property
    def total(self) -> int:
        return self.devices * self.readings


@dataclass(frozen=True)
class Reading:
    """One device's measurement; its JSON is the MQTT payload, its fields the row it must become."""

    device: str
    seq: int
    temp: float
    ts: datetime  # aware, UTC

    def payload(self) -> str:
        ts = self.ts.isoformat(timespec="microseconds")
        return json.dumps({"device": self.device, "seq": self.seq, "temp": self.temp, "ts": ts})

    def row(self) -> Row:
        """The reading as the canonical text ``table_equality`` makes of a database's row."""
        values = (self.device, str(self.seq), repr(self.temp), self.ts.strftime("%Y-%m-%d %H:%M:%S.%f"))
        return tuple(canonical(v, k) for v, k in zip(values, COLUMNS.values(), strict=True))


def topics(run_id: str) -> tuple[str, str]:
    """The run's MQTT topic filter (``demo/<run>/+/telemetry``) and RocketMQ topic."""
    return f"demo/{run_id}/+/telemetry", f"iot-telemetry-{run_id}"


def table_name(run_id: str) -> str:
    return f"telemetry_{run_id}"


def connector_configs(run_id: str, cfg: StackConfig, target: URL) -> tuple[dict[str, str], dict[str, str]]:
    """The source and sink configs, as a RocketMQ Connect and a Kafka Connect user already has them:
    RocketMQ Connect's MQTT source keys, and Confluent's JDBC sink reading plain JSON by a declared
    schema (no envelope: the devices publish bare JSON), upserting by ``(device, seq)``."""
    mqtt_filter, topic = topics(run_id)
    source = {
        "connector.class": "org.apache.rocketmq.connect.mqtt.connector.MqttSourceConnector",
        "mqttBrokerUrl": f"tcp://{cfg.host}:{cfg.mqtt_port}",
        "mqttAccessKey": cfg.mqtt_user,
        "mqttSecretKey": f"${{env:{PASSWORD_ENV}}}",
        "sourceTopic": mqtt_filter,
        "connect.topicname": topic,
        "mqtt.qos": "1",
        "value.converter": "string",
    }
    sink = {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "connection.url": f"jdbc:postgresql://{target.host}:{target.port}/{target.database}?user={target.username}",
        "topics": topic,
        "table.name.format": table_name(run_id),
        "insert.mode": "upsert",
        "pk.mode": "record_value",
        "pk.fields": "device,seq",
        "auto.create": "true",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "value.converter.schema": VALUE_SCHEMA,
        "poll.interval.ms": "500",
    }
    return source, sink


class Devices:
    """``size.devices`` simulated devices, one MQTT connection each, publishing ``size.readings``
    readings at ``size.rate`` per second each, at QoS 1, on one thread.

    A reading counts as published once its PUBACK came back (the broker holds it): ``acked`` keeps
    each device's readings in that order with the moment it was seen acknowledged (monotonic), which
    the live view's lag is measured from. Device ``i``'s readings are spread over its period so the
    fleet publishes evenly, not in bursts of ``devices`` messages.
    """

    def __init__(self, cfg: StackConfig, run_id: str, size: FleetSize, seed: int = 7) -> None:
        self.size, self._cfg, self._run = size, cfg, run_id
        width = len(str(size.devices - 1))
        self.names = [f"d{i:0{width}d}" for i in range(size.devices)]
        self._rng = random.Random(seed)
        self._temps = [round(self._rng.uniform(15, 25), 2) for _ in self.names]
        self.acked: dict[str, list[tuple[Reading, float]]] = {d: [] for d in self.names}
        self.errors: list[str] = []
        self._clients: list[paho.Client] = []
        self._first: Reading | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run_fleet, name="mqtt-devices", daemon=True)
        self.publish_seconds = 0.0  # from the start to the last PUBACK

    def topic(self, device: str) -> str:
        return f"demo/{self._run}/{device}/telemetry"

    def connect(self, timeout_s: float = 15) -> None:
        import paho.mqtt.client as paho

        for name in self.names:
            client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"demo-{self._run}-{name}")
            client.username_pw_set(self._cfg.mqtt_user, self._cfg.mqtt_password)
            client.connect(self._cfg.host, self._cfg.mqtt_port)
            client.loop_start()
            self._clients.append(client)
        deadline = time.monotonic() + timeout_s
        while not all(c.is_connected() for c in self._clients):
            if time.monotonic() > deadline:
                raise SystemExit(f"demo: the devices could not connect to the MQTT broker "
                                 f"{self._cfg.mqtt_url(hide_password=True)}")  # fmt: skip
            time.sleep(0.05)

    def _reading(self, index: int, seq: int) -> Reading:
        self._temps[index] = round(self._temps[index] + self._rng.uniform(-0.3, 0.3), 2)
        return Reading(self.names[index], seq, self._temps[index], datetime.now(UTC))

    @property
    def published(self) -> int:
        return sum(len(a) for a in self.acked.values())

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def publish_first(self, timeout_s: float = 10) -> None:
        """Publish the first device's first reading (again: the same payload each time, so however
        many land they are one row) and wait for its PUBACK: the demo's probe of the pipeline."""
        if self._first is None:
            self._first = self._reading(0, 0)
        info = self._clients[0].publish(self.topic(self.names[0]), self._first.payload(), qos=1)
        try:
            info.wait_for_publish(timeout_s)
            acknowledged = info.is_published()
        except (RuntimeError, ValueError):  # not sent (connection lost): published again next time
            acknowledged = False
        if acknowledged and not self.acked[self.names[0]]:
            self.acked[self.names[0]].append((self._first, time.monotonic()))

    def first_landed(self, target_db: Engine, table: str) -> bool:
        """Whether the table holds the first device's first reading (the probe) yet."""
        if not inspect(target_db).has_table(table):
            return False  # auto-created by the sink's first batch
        with target_db.connect() as conn:
            found = conn.execute(
                text(f'SELECT 1 FROM "{table}" WHERE device = :d AND seq = 0'), {"d": self.names[0]}
            ).first()
        return found is not None

    def start(self) -> Devices:
        self._thread.start()
        return self

    def _run_fleet(self) -> None:
        size, t0 = self.size, time.monotonic()
        next_seq = [len(self.acked[d]) for d in self.names]  # the first device's reading 0 is sent
        pending: list[list[tuple[Reading, Any]]] = [[] for _ in self.names]
        while not self._stop.is_set():
            elapsed = time.monotonic() - t0
            for i, name in enumerate(self.names):
                # reading k of device i is due at (k + i / devices) / rate: the fleet publishes evenly
                due = min(size.readings, max(0, math.floor(elapsed * size.rate - i / size.devices) + 1))
                while next_seq[i] < due:
                    reading = self._reading(i, next_seq[i])
                    info = self._clients[i].publish(self.topic(name), reading.payload(), qos=1)
                    pending[i].append((reading, info))
                    next_seq[i] += 1
                self._collect(name, pending[i])
            if all(n >= size.readings for n in next_seq):
                break
            time.sleep(0.02)
        deadline = time.monotonic() + ACK_WAIT_S  # the last ones in flight (all of them if stopped)
        for name, waiting in zip(self.names, pending, strict=True):
            self._collect(name, waiting, deadline)
        self.publish_seconds = time.monotonic() - t0

    def _collect(
        self, device: str, pending: list[tuple[Reading, Any]], deadline: float | None = None
    ) -> None:
        """Move the device's acknowledged readings, in order, from ``pending`` to ``acked``. Without
        ``deadline`` the first one not acknowledged yet ends the pass; with one, each is waited for
        until then, and one still unacknowledged is an error."""
        while pending:
            reading, info = pending[0]
            try:
                if deadline is not None:
                    info.wait_for_publish(max(0.001, deadline - time.monotonic()))
                problem = "" if info.is_published() else f"no PUBACK within {ACK_WAIT_S} s"
            except (RuntimeError, ValueError) as exc:  # never sent: the client lost its connection
                problem = str(exc)
            else:
                if problem and deadline is None:
                    return
            if problem:
                self.errors.append(f"{device} seq {reading.seq}: {problem}")
            else:
                self.acked[device].append((reading, time.monotonic()))
            pending.pop(0)

    def stop(self) -> None:
        """Stop publishing (the readings in flight are waited for), and disconnect."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)
        for client in self._clients:
            client.disconnect()
            client.loop_stop()
        self._clients.clear()

    def readings(self) -> list[Reading]:
        return [r for device in self.names for r, _ in self.acked[device]]


class ReadingsSampler(ProgressSampler):
    """The live view's row for the run's table: readings the devices published (acknowledged) against
    rows in PostgreSQL, read with one ``GROUP BY device``.

    ``lag rows`` is published minus landed, per device; ``lag s`` is how long the oldest reading
    not yet in the table has been acknowledged, taking each device's rows as its first readings (a
    device's readings reach the table in order: one MQTT topic, one record key). The source side is
    the devices' own count, not a SQL table: the base class's queries are not used."""

    def __init__(self, devices: Devices, target: Engine, table: str) -> None:
        self._devices, self._target, self._table = devices, target, table
        self._target_rows: int | None = None
        self._last = time.monotonic()

    def _landed(self) -> dict[str, int]:
        """Rows per device in the table (none while the sink has not created it)."""
        if not inspect(self._target).has_table(self._table):
            return {}
        with self._target.connect() as conn:
            rows = conn.execute(text(f'SELECT device, COUNT(*) FROM "{self._table}" GROUP BY device')).all()
        return {str(d): int(n) for d, n in rows}

    def sample(self) -> list[TableSample]:
        landed = self._landed()
        now = time.monotonic()
        elapsed, self._last = max(now - self._last, 1e-3), now
        published, behind = 0, 0
        lag_s: float | None = 0.0 if landed else None
        for device, acked in self._devices.acked.items():
            held = landed.get(device, 0)
            published += len(acked)
            behind += max(0, len(acked) - held)
            if lag_s is not None and held < len(acked):
                lag_s = max(lag_s, now - acked[held][1])
        rows = sum(landed.values())
        rate = 0.0 if self._target_rows is None else max(0, rows - self._target_rows) / elapsed
        self._target_rows = rows
        return [TableSample(LABEL, published, rows, rate, behind, lag_s)]


class DevicesView(LiveView):
    """`make demo`'s live view with this pipeline's title and the devices' progress as its caption."""

    def __init__(self, devices: Devices, target_db: Engine, table: str) -> None:
        super().__init__(ReadingsSampler(devices, target_db, table), target="PostgreSQL")
        self.devices = devices

    def caption(self) -> str:
        d, size = self.devices, self.devices.size
        errors = f"; {len(d.errors)} errors, last: {d.errors[-1]}" if d.errors else ""
        return (f"{d.published:,} of {size.total:,} readings acked ({size.devices} devices × "
                f"{size.readings:,} at {size.rate:g}/s, QoS 1){errors}")  # fmt: skip

    def frame(self, phase: str) -> Table:
        table = render(self.latest, None, phase, self.target)
        table.title = f"IoT: MQTT → RocketMQ → {self.target} — {phase}"
        table.caption = self.caption()
        return table

    def refresh(self, load: LoadStats | None, phase: str) -> list[TableSample]:
        if self._live is None:  # no terminal: the plain lines every few seconds
            return super().refresh(load, phase)
        self.latest = self.sampler.sample()
        self._live.update(self.frame(phase), refresh=True)
        return self.latest


def ensure_database(cfg: StackConfig, name: str) -> URL:
    """The PostgreSQL database ``name``, created if missing (kept: each run has its own table)."""
    admin = make_url(cfg.database_url)
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            found = conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).first()
            if found is None:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        engine.dispose()
    return admin.set(database=name)


async def await_pipeline(
    client: SluiceClient,
    names: Sequence[str],
    devices: Devices,
    landed: Callable[[], bool],
    timeout_s: float,
) -> float:
    """Seconds until a reading published now reaches the table (`make demo-cdc`'s probe, with the
    first device's first reading as the probe). MQTT keeps nothing for a subscription that does not
    exist yet: readings published before the source's task subscribed would be lost."""
    t0 = time.monotonic()
    print("waiting until the pipeline is live (the first reading published until it reaches the table)",
          flush=True)  # fmt: skip
    while True:
        await asyncio.to_thread(devices.publish_first)
        if await asyncio.to_thread(landed):
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout_s:
            raise SystemExit(f"demo: no reading reached the table within {timeout_s:.0f} s")
        failed = await failed_tasks(client, names)
        if failed:
            raise SystemExit("demo: a connector failed:\n  " + "\n  ".join(failed))
        await asyncio.sleep(2)


def prove(readings: Sequence[Reading], target_db: Engine, table: str) -> TableComparison:
    """Every reading against the table's row of its ``(device, seq)``, every column by content.

    ``compare_rows`` merges two streams by one integer key: both sides' rows are numbered by their
    place among all ``(device, seq)`` either side holds (the ``reading`` column), and the examples
    name the device and sequence number again."""
    columns, kinds = list(COLUMNS), list(COLUMNS.values())
    held = column_kinds(target_db, table)
    if not held:
        return TableComparison(table, columns, problem="the table does not exist in PostgreSQL")
    absent = [c for c in columns if c not in held]
    if absent:
        return TableComparison(table, columns, problem=f"columns missing in the table: {', '.join(absent)}")
    source = [r.row() for r in readings]
    target = list(canonical_rows(target_db, table, columns, kinds, key="seq"))

    def key(row: Row) -> tuple[str, int]:
        return str(row[0]), int(row[1] or 0)

    order = sorted({key(r) for r in source} | {key(r) for r in target})
    number = {k: i for i, k in enumerate(order)}

    def numbered(rows: list[Row]) -> list[Row]:
        return sorted(((str(number[key(r)]), *r) for r in rows), key=lambda r: int(r[0] or 0))

    result = compare_rows(table, [KEY, *columns], KEY, iter(numbered(source)), iter(numbered(target)))
    result.columns = columns
    result.examples = [
        re.sub(rf"{KEY}=(\d+):", lambda m: "device={} seq={}:".format(*order[int(m[1])]), e)
        for e in result.examples
    ]
    return result


def print_verdict(result: TableComparison, size: FleetSize, where: str) -> bool:
    """The comparison, then one ``VERDICT`` line; True if the table equals what was published."""
    print("\nproof: every reading acknowledged by the broker against its row by (device, seq), every "
          "column by content (temperatures exact, instants in UTC to the microsecond)")  # fmt: skip
    print(f"  {result.summary()}")
    for example in result.examples:
        print(f"      {example}")
    verdict = "EQUAL" if result.equal else "NOT EQUAL"
    print(f"\nVERDICT: the readings {size.devices} devices published over MQTT and PostgreSQL {where} "
          f"are {verdict} ({result.source_rows:,} readings, {result.target_rows:,} rows)")  # fmt: skip
    return result.equal


async def publish_and_watch(
    client: SluiceClient, names: Sequence[str], devices: Devices, view: DevicesView, catch_up_s: float
) -> None:
    """The live view while the devices publish, then until the table caught up."""
    try:
        with view:
            devices.start()
            phase = "devices publishing"
            while devices.running:
                await watch(client, names, view, None, phase, time.monotonic() + 5, False)
            await watch(client, names, view, None, "devices done, catching up",
                        time.monotonic() + catch_up_s, True)  # fmt: skip
    finally:
        await asyncio.to_thread(devices.stop)
    first = f", first: {devices.errors[0]}" if devices.errors else ""
    print(f"devices: {devices.published:,} readings acknowledged by the broker (QoS 1) in "
          f"{devices.publish_seconds:.1f} s, {len(devices.errors)} publish errors{first}")  # fmt: skip


async def run_demo(cfg: StackConfig, size: FleetSize, catch_up_s: float, database: str = DATABASE) -> bool:
    run_id = time.strftime("%Y%m%d%H%M%S")
    target = ensure_database(cfg, database)
    table = table_name(run_id)
    where = f"{database}.{table}"
    print(f"devices publish to {cfg.mqtt_url(hide_password=True)}; readings land in PostgreSQL "
          f"{target.render_as_string()}, table {table}")  # fmt: skip
    target_db = connect_url(target)
    devices = Devices(cfg, run_id, size)
    queue = f"sluice-demo-mqtt-{run_id}"
    env = {"SLUICE_TASK_QUEUE": queue, PASSWORD_ENV: cfg.mqtt_password}
    try:
        async with started_worker(cfg, f"demo-mqtt-worker-{run_id}", env):
            client = await SluiceClient.connect(cfg.temporal_address, cfg.temporal_namespace, queue)
            source_config, sink_config = connector_configs(run_id, cfg, target)
            names = (f"iot-sink-{run_id}", f"iot-mqtt-source-{run_id}")
            await create_connectors(client, cfg, ((names[0], sink_config), (names[1], source_config)))
            await asyncio.to_thread(devices.connect)
            landed = partial(devices.first_landed, target_db, table)
            live = await await_pipeline(client, names, devices, landed, catch_up_s)
            print(f"the pipeline is live after {live:.1f} s; {size.devices} devices start publishing",
                  flush=True)  # fmt: skip
            await publish_and_watch(
                client, names, devices, DevicesView(devices, target_db, table), catch_up_s
            )
            result = await asyncio.to_thread(prove, devices.readings(), target_db, table)
            for name in names:
                await client.delete(name)
            print(f"connectors deleted; the table is kept: {target.render_as_string()} {table}")
    finally:
        devices.stop()
        target_db.dispose()
    return print_verdict(result, size, where)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sluice.worker.demo.mqtt", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--devices", type=int, default=FleetSize.devices, help="simulated devices")
    parser.add_argument("--readings", type=int, default=FleetSize.readings, help="readings per device")
    parser.add_argument("--rate", type=float, default=FleetSize.rate, help="readings per second, per device")
    parser.add_argument("--catch-up-seconds", type=float, default=300, help="longest wait for catch-up")
    parser.add_argument("--database", default=DATABASE, help="PostgreSQL database (created if missing)")
    args = parser.parse_args(argv)
    if args.devices < 1 or args.readings < 1 or args.rate <= 0:
        parser.error("--devices, --readings and --rate must be positive")
    size = FleetSize(args.devices, args.readings, args.rate)
    return run_on_stack(lambda cfg: run_demo(cfg, size, args.catch_up_seconds, args.database))


if __name__ == "__main__":
    sys.exit(main())
