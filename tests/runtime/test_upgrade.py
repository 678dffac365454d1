"""Running connectors continue across an upgrade: what the last release's worker wrote (its plans,
positions, the sink's ledger and its Temporal workflow histories) is read by this release's worker.

The last release's code is taken from git (``RELEASE``, this clone's history) and run as a worker
of its own (``PYTHONPATH`` puts its ``sluice`` package before the installed one). It runs a MariaDB
-> jdbc-source -> RocketMQ -> jdbc-sink (upsert into another PostgreSQL database: the ledger path)
pipeline until the first rows are in, and is SIGKILLed mid-run, as an upgrade that replaces a
crashed worker would leave things: batches planned and half written by the old code. This
release's worker takes over on the same queue and store, with every batch run as a Spark job
(``SLUICE_LOCAL_BATCH_MAX_RECORDS=0``: the sink's stages on Spark, staged by its tasks), rows are
inserted and updated meanwhile, and the target must end equal to the source, row by row.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path

import pytest

from sluice.worker.settings import Settings
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase
from tests.runtime.helpers import FAST_HEARTBEAT, wait_for
from tests.runtime.test_jdbc_pipeline_faults import MARIADB_ORDERS, _insert, _rows, _sink, _source

#: The release the upgrade starts from: main before #50's sink stages and executor staging.
RELEASE = "92b2224"

#: The repository's folders that are ``sluice``'s subpackages (pyproject.toml's package-dir).
SUBPACKAGES = ("activities", "connectors", "workflows", "worker", "deploy")


@pytest.fixture(scope="module")
def released_code(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose ``sluice`` package is ``RELEASE``'s code (put it on ``PYTHONPATH``)."""
    repo = Path(__file__).resolve().parents[2]
    paths = ["deploy/packaging/sluice", *SUBPACKAGES]
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", RELEASE, *paths], capture_output=True, check=False
    )
    if archive.returncode != 0:
        pytest.fail(f"release {RELEASE} is not in this clone's history: {archive.stderr.decode()[-500:]}")
    root = tmp_path_factory.mktemp("release")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(root / "tree", filter="data")
    package = root / "sluice"
    shutil.copytree(root / "tree" / "deploy" / "packaging" / "sluice", package)
    for name in SUBPACKAGES:
        shutil.move(root / "tree" / name, package / name)
    return root


def _module_file(env: dict[str, str], module: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", f"import {module} as m; print(m.__file__)"],
        env=env, capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    return done.stdout.strip()


@pytest.mark.fault
@pytest.mark.private_worker  # SIGKILLs its worker, and runs two releases' workers
@pytest.mark.slow
@pytest.mark.timeout(1500)
async def test_connectors_of_the_last_release_continue_exactly_on_this_one(
    released_code: Path,
    runtime_env,
    start_worker,
    sluice,
    mariadb_db: TestDatabase,
    postgres_db: TestDatabase,
) -> None:
    src = Db.of(mariadb_db)
    src.run(MARIADB_ORDERS)
    _insert(src, range(1, 3001))
    prefix = f"U{uuid.uuid4().hex[:8]}-"
    name = uuid.uuid4().hex[:8]

    # The old code finds the local stack's state (its ports, the key sealing secrets) where this
    # release's does: by default it would look beside its own files.
    runtime_env.env.update(PYTHONPATH=str(released_code), SLUICE_STATE_DIR=str(Settings().state_dir))
    assert _module_file(runtime_env.env, "sluice.activities.sink_runner").startswith(str(released_code))
    old = start_worker()
    await sluice.create(f"src-{name}", _source(src, prefix, "timestamp+incrementing", **FAST_HEARTBEAT))
    await sluice.create(f"dst-{name}", _sink(postgres_db, prefix, "upsert", **FAST_HEARTBEAT))
    await wait_for(lambda: len(_rows(postgres_db.url)) >= 600, 600, "the old release's first batches")
    old.kill()  # mid-run: batches planned, some half written, by the old code

    del runtime_env.env["PYTHONPATH"]
    runtime_env.env["SLUICE_LOCAL_BATCH_MAX_RECORDS"] = "0"
    assert not _module_file(runtime_env.env, "sluice.activities.sink_runner").startswith(str(released_code))
    start_worker()
    src.run("UPDATE orders SET amount = amount + 1, note = 'updated' WHERE id % 10 = 0")
    _insert(src, range(3001, 4001))

    await wait_for(
        lambda: _rows(postgres_db.url) == _rows(src.url),
        900,
        "the PostgreSQL table equal to the MariaDB table after the upgrade",
    )
    rows = _rows(postgres_db.url)
    assert len(rows) == 4000 and rows[9][3] == "updated"
    for connector in (f"src-{name}", f"dst-{name}"):
        assert (await sluice.status(connector)).state == "RUNNING"
        await sluice.delete(connector)
