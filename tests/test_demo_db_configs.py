"""The configs `make demo` and `make bench-db` create validate against the real JDBC connectors.

docs/connectors.md shows the demo's configs verbatim, so a renamed key or class alias must fail here.
Skipped only while ``jdbc-source``/``jdbc-sink`` are not on this branch yet (they arrive from their
own branches); once they are, this test runs and can fail.
"""

from __future__ import annotations

import importlib.util

import pytest
from sqlalchemy.engine import make_url

from sluice.deploy.local.config import StackConfig

_MISSING = [
    m
    for m in ("sluice.connectors.jdbc.source", "sluice.connectors.jdbc.sink")
    if importlib.util.find_spec(m) is None
]


@pytest.mark.skipif(bool(_MISSING), reason=f"not merged yet: {', '.join(_MISSING)}")
def test_demo_and_bench_configs_validate(stack_config: StackConfig) -> None:
    from bench.bench_databases import Databases
    from bench.db_bench import sink_config, source_config
    from sluice.activities.connector_activities import validate_config
    from sluice.worker.demo.db import connector_configs, demo_databases

    source, sink = connector_configs("20260101000000", demo_databases(stack_config))
    dbs = Databases(
        make_url(stack_config.mariadb_url("b")),
        make_url(stack_config.database_url).set(database="s"),
        make_url(stack_config.database_url).set(database="d"),
    )
    configs = {
        "demo-source": source,
        "demo-sink": sink,
        "bench-source": source_config(dbs, dbs.mariadb, "bench_rows", "x"),
        "bench-pg-source": source_config(dbs, dbs.pg_source, "bench_rows", "x"),
        "bench-sink": sink_config(dbs, "bench_rows", "copy_x", "x"),
    }
    for name, config in configs.items():
        result = validate_config(name, config)
        assert not result.errors, (name, result.errors)
