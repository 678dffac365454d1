"""file -> RocketMQ -> PostgreSQL exactly once, with the connection password kept out of sight.

The password travels as ``${env:…}``, or literally in the URL as Kafka Connect users write it (the
client seals it into ``${sealed:…}``, connectors.sealing), and is resolved only inside the task
activity: it must not appear in the workflows' histories, in `sluice connector status`, or in the
worker's log.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.runtime.helpers import wait_for
from tests.runtime.test_file_pipeline import _lines

SECRET = f"s3cr3t-{uuid.uuid4().hex[:10]}"


@pytest.mark.private_worker  # stops or kills its worker, or sets its environment
async def test_postgres_sink_gets_every_line_once_and_the_password_never_leaks(
    tmp_path: Path, start_worker, sluice, topic_name, runtime_env, stack_config, fresh_schema
) -> None:
    # Trust auth accepts any password, so a real URL with a password works against the local stack.
    url = stack_config.database_url.replace("sluice@", f"sluice:{SECRET}@")
    runtime_env.env["SINK_DB_URL"] = url
    src = tmp_path / "in.txt"
    src.write_text(_lines(0, 2000))
    worker = start_worker()
    name = uuid.uuid4().hex[:8]
    await sluice.create(
        f"src-{name}",
        {
            "connector.class": "file-source",
            "file": str(src),
            "topic": topic_name,
            "batch.max.bytes": str(32 * 1024),
            "poll.interval.ms": "200",
        },
    )
    sink = f"pg-{name}"
    await sluice.create(
        sink,
        {
            "connector.class": "postgres-sink",
            "topics": topic_name,
            "connection.url": "${env:SINK_DB_URL}",
            "schema": fresh_schema,
            "table": "lines",
            "auto.create": "true",
            "batch.max.records": "700",
            "poll.interval.ms": "200",
        },
    )
    literal_sink = f"pg-literal-{name}"
    await sluice.create(
        literal_sink,
        {
            "connector.class": "postgres-sink",
            "topics": topic_name,
            "connection.url": url,  # the password as users' files have it
            "schema": fresh_schema,
            "table": "literal_lines",
            "auto.create": "true",
            "batch.max.records": "700",
            "poll.interval.ms": "200",
        },
    )
    engine = create_engine(stack_config.database_url)

    def rows(table: str) -> list[str]:
        with engine.connect() as conn:
            exists = conn.execute(text("SELECT to_regclass(:t)"), {"t": f'"{fresh_schema}".{table}'}).scalar()
            if exists is None:
                return []
            return list(
                conn.execute(text(f'SELECT value FROM "{fresh_schema}".{table} ORDER BY "offset"')).scalars()
            )

    expected = _lines(0, 2000).splitlines()
    await wait_for(lambda: rows("lines") == expected, 240, "every line in PostgreSQL, once, in order")
    await wait_for(lambda: rows("literal_lines") == expected, 120, "every line via the literal URL too")

    history = await sluice.handle(sink).fetch_history()
    raw = b"".join(event.SerializeToString() for event in history.events)  # payload bytes as stored
    assert b"${env:SINK_DB_URL}" in raw, "the reference, not the value, is what the workflow carries"
    assert SECRET.encode() not in raw
    literal_history = await sluice.handle(literal_sink).fetch_history()
    literal_raw = b"".join(event.SerializeToString() for event in literal_history.events)
    assert b"${sealed:" in literal_raw, "the client sealed the literal URL before starting the workflow"
    assert SECRET.encode() not in literal_raw
    status = subprocess.run(
        [sys.executable, "-m", "sluice.worker.cli", "connector", "status", sink],
        capture_output=True,
        text=True,
        env=runtime_env.env,
        timeout=60,
    )
    assert status.returncode == 0, status.stderr
    assert "${env:SINK_DB_URL}" in status.stdout or "****" in status.stdout
    assert SECRET not in status.stdout + status.stderr
    await sluice.delete(f"src-{name}")
    await sluice.delete(sink)
    await sluice.delete(literal_sink)
    worker.terminate()
    assert SECRET not in worker.log.read_text(errors="replace")
    engine.dispose()
