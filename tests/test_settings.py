"""The one settings object: local-stack defaults, addresses that follow the ports, overrides, and a
bad environment value refused with its variable's name (in-process and through the real CLI)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from sluice.deploy.local.config import REPO_ROOT, StackConfig
from sluice.worker.codec import FernetCodec, payload_codec
from sluice.worker.settings import Settings, SettingsError, load_settings, settings


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No SLUICE_* variable set: what a fresh shell sees."""
    for name in list(os.environ):
        if name.upper().startswith("SLUICE_"):
            monkeypatch.delenv(name)
    return monkeypatch


def test_defaults_are_the_local_stack(clean_env: pytest.MonkeyPatch) -> None:
    s = load_settings()
    assert s.state_dir == (REPO_ROOT / ".sluice").resolve()
    ports = (s.pg_port, s.temporal_port, s.temporal_ui_port, s.namesrv_port, s.broker_port, s.proxy_port)
    assert ports == (15432, 17233, 18233, 19876, 10911, 18081)
    assert s.temporal_address == "127.0.0.1:17233"
    assert s.temporal_namespace == "default"
    assert s.task_queue == "sluice"
    assert s.database_url == "postgresql+psycopg://sluice@127.0.0.1:15432/sluice"
    assert s.store_schema == "sluice"
    assert s.namesrv == "127.0.0.1:19876"
    assert (s.spark_master, s.spark_driver_memory, s.max_tasks) == ("local[2]", "2g", 8)
    assert s.payload_key is None and payload_codec(s.payload_key) is None


def test_addresses_follow_the_ports_and_the_stack_agrees(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("SLUICE_PG_PORT", "25432")
    clean_env.setenv("SLUICE_TEMPORAL_PORT", "27233")
    clean_env.setenv("SLUICE_NAMESRV_PORT", "29876")
    clean_env.setenv("SLUICE_STATE_DIR", "relative/state")
    s = load_settings()
    assert s.database_url == "postgresql+psycopg://sluice@127.0.0.1:25432/sluice"
    assert s.temporal_address == "127.0.0.1:27233"
    assert s.namesrv == "127.0.0.1:29876"
    assert s.state_dir.is_absolute() and s.state_dir == Path("relative/state").resolve()
    stack = s.stack
    assert (stack.database_url, stack.temporal_address, stack.namesrv_address) == (
        s.database_url,
        s.temporal_address,
        s.namesrv,
    )
    assert stack.state_dir == s.state_dir


def test_explicit_addresses_win_and_reach_the_runtime(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("SLUICE_PG_PORT", "25432")
    clean_env.setenv("SLUICE_DATABASE_URL", "postgresql+psycopg://app@db:5432/prod")
    clean_env.setenv("SLUICE_TEMPORAL_ADDRESS", "temporal.internal:7233")
    clean_env.setenv("SLUICE_NAMESRV", "mq:9876")
    clean_env.setenv("SLUICE_SPARK_MASTER", "spark://m:7077")
    clean_env.setenv("SLUICE_SPARK_DRIVER_MEMORY", "512m")
    clean_env.setenv("SLUICE_STORE_SCHEMA", "offsets")
    clean_env.setenv("SLUICE_MAX_TASKS", "3")
    clean_env.setenv("SLUICE_TASK_QUEUE", "")  # empty means unset, as before
    s = load_settings()
    assert s.temporal_address == "temporal.internal:7233" and s.task_queue == "sluice"
    assert s.stack.database_url.endswith(":25432/sluice")  # the local stack keeps its own port
    runtime = s.runtime
    assert runtime.database_url == "postgresql+psycopg://app@db:5432/prod"
    assert (runtime.namesrv, runtime.spark_master, runtime.spark_driver_memory) == (
        "mq:9876",
        "spark://m:7077",
        "512m",
    )
    assert runtime.store_schema == "offsets" and s.max_concurrent_tasks == 3


def test_payload_key_is_secret_and_builds_the_codec(clean_env: pytest.MonkeyPatch) -> None:
    key = Fernet.generate_key().decode()
    clean_env.setenv("SLUICE_PAYLOAD_KEY", key)
    s = load_settings()
    assert key not in repr(s) and key not in str(s) and key not in s.model_dump_json()
    assert isinstance(payload_codec(s.payload_key), FernetCodec)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("SLUICE_PG_PORT", "abc", "SLUICE_PG_PORT: expected an integer, got 'abc'"),
        ("SLUICE_TEMPORAL_PORT", "1.5", "SLUICE_TEMPORAL_PORT: expected an integer, got '1.5'"),
        ("SLUICE_BROKER_PORT", "0", "SLUICE_BROKER_PORT: expected an integer in 1..65535, got '0'"),
        ("SLUICE_PROXY_PORT", "65536", "SLUICE_PROXY_PORT: expected an integer in 1..65535, got '65536'"),
        ("SLUICE_MAX_TASKS", "0", "SLUICE_MAX_TASKS: expected an integer >= 1, got '0'"),
        (
            "SLUICE_SPARK_DRIVER_MEMORY",
            "lots",
            "SLUICE_SPARK_DRIVER_MEMORY: expected a size such as 512m or 2g, got 'lots'",
        ),
    ],
)
def test_a_bad_value_names_its_variable(
    clean_env: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    clean_env.setenv(name, value)
    with pytest.raises(SettingsError) as raised:
        load_settings()
    assert str(raised.value) == f"invalid environment: {message}"


def test_every_bad_value_is_named_once_and_a_bad_key_is_never_echoed(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("SLUICE_PG_PORT", "x")  # the database URL derives from it: not reported again
    clean_env.setenv("SLUICE_NAMESRV_PORT", "-1")
    clean_env.setenv("SLUICE_PAYLOAD_KEY", "hunter2-not-a-key")
    with pytest.raises(SettingsError) as raised:
        load_settings()
    text = str(raised.value)
    assert text.count("SLUICE_") == 3 and "SLUICE_DATABASE_URL" not in text
    assert "SLUICE_PG_PORT" in text and "SLUICE_NAMESRV_PORT" in text
    assert "SLUICE_PAYLOAD_KEY: expected a Fernet key" in text and "hunter2" not in text


def test_settings_are_read_once_per_process(clean_env: pytest.MonkeyPatch) -> None:
    settings.cache_clear()
    try:
        clean_env.setenv("SLUICE_TASK_QUEUE", "first")
        first = settings()
        clean_env.setenv("SLUICE_TASK_QUEUE", "second")
        assert settings() is first and first.task_queue == "first"
    finally:
        settings.cache_clear()


def test_overrides_in_process_keep_the_rest(clean_env: pytest.MonkeyPatch) -> None:
    s = Settings(task_queue="q1", pg_port=25432)
    assert s.task_queue == "q1" and s.database_url.endswith(":25432/sluice")
    copy = s.model_copy(update={"store_schema": "bench_x"})
    assert copy.store_schema == "bench_x" and copy.task_queue == "q1"


def _sluice(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sluice.worker.cli", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )


@pytest.mark.parametrize(
    ("args", "name", "value", "line"),
    [
        (("stack", "status"), "SLUICE_PG_PORT", "abc", "SLUICE_PG_PORT: expected an integer, got 'abc'"),
        (
            ("stack", "status"),
            "SLUICE_TEMPORAL_UI_PORT",
            "70000",
            "SLUICE_TEMPORAL_UI_PORT: expected an integer in 1..65535, got '70000'",
        ),
        (("worker",), "SLUICE_MAX_TASKS", "many", "SLUICE_MAX_TASKS: expected an integer, got 'many'"),
        (("connector", "list"), "SLUICE_PAYLOAD_KEY", "oops", "SLUICE_PAYLOAD_KEY: expected a Fernet key"),
    ],
)
def test_cli_refuses_a_bad_environment_in_one_line(
    args: tuple[str, ...], name: str, value: str, line: str
) -> None:
    result = _sluice(*args, **{name: value})
    assert result.returncode != 0
    assert result.stderr.startswith(f"sluice: invalid environment: {line}")
    assert result.stderr.count("\n") == 1 and result.stdout == ""
    assert "Traceback" not in result.stderr


def test_cli_takes_an_empty_variable_as_unset(stack_config: StackConfig) -> None:
    result = _sluice("stack", "status", SLUICE_PG_PORT="", SLUICE_NAMESRV_PORT="")
    assert result.returncode == 0, result.stderr
    assert f"127.0.0.1:{stack_config.namesrv_port}" in result.stdout


def test_spark_jars_are_files_or_folders_and_a_missing_one_is_refused(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = tmp_path / "jars"
    folder.mkdir()
    for name in ("b.jar", "a.jar", "notes.txt"):
        (folder / name).write_text("")
    single = tmp_path / "single.jar"
    single.write_text("")
    clean_env.setenv("SLUICE_SPARK_JARS", f"{folder}, {single}")
    assert load_settings().runtime.spark_jars == (str(folder / "a.jar"), str(folder / "b.jar"), str(single))
    clean_env.setenv("SLUICE_SPARK_JARS", str(tmp_path / "gone.jar"))
    with pytest.raises(SettingsError, match=r"SLUICE_SPARK_JARS.*no such file or folder: .*gone\.jar"):
        load_settings()


def test_spark_jars_default_to_the_local_stacks_lake_jars(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clean_env.setenv("SLUICE_STATE_DIR", str(tmp_path))
    assert load_settings().spark_jar_files() == ()  # not fetched: no jars, no lake extensions
    (tmp_path / "spark-jars").mkdir()
    delta = tmp_path / "spark-jars" / "delta-spark_4.1_2.13-4.4.0.jar"
    delta.write_text("")
    assert load_settings().spark_jar_files() == (str(delta),)
