"""`pip install sluice` as a new user gets it: only the light client, under the `sluice` name, able
to start, watch, control and delete connectors that a real worker (from this repository) runs."""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from sluice.deploy.local.config import StackConfig
from sluice.worker.settings import settings
from sluice.worker.temporal_client import connect
from tests.client.conftest import LightVenv
from tests.runtime.workers import RuntimeEnv

HERE = Path(__file__).parent
GENERIC = ("worker", "connectors", "workflows", "activities", "deploy")
HEAVY = ("pyspark", "sqlalchemy", "pydantic", "pydantic_settings", "fastapi", "typer", "pyarrow", "pandas")

PROBE = f"""
import importlib, importlib.metadata as md, sys
import sluice
from sluice import Client, SyncClient, ConnectorConfig, ConnectorStatus
failed = []
for name in {GENERIC + HEAVY!r}:
    try:
        importlib.import_module(name)
    except ImportError:
        failed.append(name)
print(sorted(failed))
print(sorted(m.split(".")[0] for m in sys.modules if m.split(".")[0] in {GENERIC + HEAVY!r}))
dist = md.distribution("sluice")
print(dist.read_text("top_level.txt").split())
print(sorted(r.split(";")[0].split(">")[0].split("<")[0].strip() for r in dist.requires if "extra" not in r))
print(md.entry_points(group="sluice.connectors")["dummy-sink"].value)
"""


def test_light_client_drives_a_pipeline_run_by_a_real_worker(
    light_venv_build: Future[LightVenv],
    start_worker: Callable[[], object],
    runtime_env: RuntimeEnv,
    stack_config: StackConfig,
    topic_name: str,
    tmp_path: Path,
) -> None:
    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("".join(f"line {i:05d} {uuid.uuid4().hex}\n" for i in range(300)))
    start_worker()  # while the venv is built (first test of the session) or right away
    light_venv = light_venv_build.result()
    script = light_venv.home / "light_script.py"
    shutil.copy(HERE / "light_script.py", script)
    suffix = uuid.uuid4().hex[:8]
    result = light_venv.run(
        str(script),
        stack_config.temporal_address,
        runtime_env.task_queue,
        topic_name,
        str(src),
        str(dst),
        suffix,
        timeout=480,
        # The workers' sealing key (here: the local stack's key file), as a service would be given it.
        SLUICE_SECRETS_KEY=settings().sealing_key().decode(),
    )
    assert result.returncode == 0 and "light client OK" in result.stdout, result.stderr[-4000:]

    # The JDBC password the sync client validated went through Temporal sealed, never in plaintext.
    import asyncio

    async def histories() -> bytes:
        """Every check workflow's history on the queue (visibility may trail by a moment)."""
        client = await connect(stack_config.temporal_address, stack_config.temporal_namespace)
        query = f"WorkflowType='SluiceValidateConfig' AND TaskQueue='{runtime_env.task_queue}'"
        found = b""
        for _ in range(20):
            found = b""
            async for wf in client.list_workflows(query):
                history = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
                found += b"".join(event.SerializeToString() for event in history.events)
            if b"connection.password" in found:
                break
            await asyncio.sleep(0.5)
        return found

    raw = asyncio.run(histories())
    assert b"connection.password" in raw and b"${sealed:" in raw
    assert f"hunter2-{suffix}".encode() not in raw


def test_the_wheel_installs_only_the_light_client_under_sluice(light_venv: LightVenv) -> None:
    result = light_venv.run("-c", PROBE)
    assert result.returncode == 0, result.stderr
    failed, loaded, top_level, requires, entry_point = result.stdout.strip().splitlines()
    assert failed == str(sorted(GENERIC + HEAVY)), "every generic name and heavy package is absent"
    assert loaded == "[]"
    assert top_level == "['sluice']"
    assert requires == "['cryptography', 'temporalio']"
    assert entry_point == "sluice.connectors.dummy:DummySinkConnector"
    # The console script comes with every wheel; without the worker extras it says what is missing.
    cli = subprocess.run(
        [str(light_venv.python.parent / "sluice"), "connector", "list"],
        cwd=light_venv.home,
        env=light_venv.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cli.returncode == 2 and cli.stderr.count("\n") == 1, cli
    assert "needs the worker extras" in cli.stderr and "pip install 'sluice[worker]'" in cli.stderr


def test_the_client_modules_import_no_plugin_spark_or_settings_code() -> None:
    """The light closure, checked in the repository too (the wheel test only sees what is missing)."""
    probe = (
        "import sys, sluice, sluice.worker.client, sluice.worker.client_sync, sluice.worker.client_checks; "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY) | {'rich', 'yaml'}!r}), "
        "sorted(m for m in sys.modules if m.startswith("
        "('sluice.connectors.plugins', 'sluice.connectors.api', 'sluice.activities'))))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[] []", result
