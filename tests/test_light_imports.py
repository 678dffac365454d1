"""What the light and start-up paths import: pinned, so that a function-local import's comment (``#
pyspark: config validation imports this module …``) stays true and a moved import cannot make the CLI,
the REST app or config validation start pyspark.

Each probe runs in a fresh interpreter (``sys.modules`` of this test session holds everything). The
light client's closure is pinned by tests/client/test_light_client.py.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sluice.connectors.plugins import BUILTIN_CONNECTORS

SPARK = ("pyspark", "py4j", "pandas")
#: Record stages (transforms among them) are Arrow: validating a config that has transforms loads
#: pyarrow (never Spark); one without transforms does not.
ARROW = ("pyarrow", "numpy")
DRIVERS = ("sqlalchemy", "psycopg", "pymysql", "pymysqlreplication")

_REPORT = """
import json, sys
print(json.dumps({
    "packages": sorted({m.split(".")[0] for m in sys.modules}),
    "sluice": sorted(m for m in sys.modules if m.startswith("sluice.")),
}))
"""


def _loaded(code: str) -> tuple[set[str], set[str]]:
    """Top-level packages and ``sluice.*`` modules in ``sys.modules`` after running ``code``."""
    result = subprocess.run(
        [sys.executable, "-c", code + _REPORT], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    return set(report["packages"]), set(report["sluice"])


@pytest.mark.parametrize(
    "code",
    ["import sluice.worker.cli", "from sluice.worker.cli import main; main(['--help'])"],
    ids=["import", "--help"],
)
def test_the_cli_starts_without_spark_drivers_plugins_or_web_server(code: str) -> None:
    packages, modules = _loaded(code)
    heavy = (*SPARK, *ARROW, *DRIVERS, "fastapi", "uvicorn", "yaml", "javaproperties")
    assert packages & set(heavy) == set()
    assert modules & {"sluice.connectors.plugins", "sluice.activities.store"} == set()


def test_validating_a_config_on_the_command_line_does_not_import_spark() -> None:
    """``sluice connector validate`` loads the plugins and validates locally (no services needed)."""
    code = (
        "from sluice.worker.cli import main\n"
        "code = main(['connector', 'validate', '--set', 'connector.class=file-source',\n"
        "             '--set', 'file=/tmp/sluice-light-imports.txt', '--set', 'topic=t'])\n"
        "assert code == 0, code\n"
    )
    packages, modules = _loaded(code)
    assert "sluice.connectors.plugins" in modules, "the probe should have validated with the plugins"
    assert packages & {*SPARK, *ARROW, *DRIVERS} == set()


def test_loading_the_builtin_connector_classes_imports_no_spark_or_database_driver() -> None:
    """Config validation imports the connector classes (CLI, REST API, the validate activity);
    SQLAlchemy comes with the JDBC and CDC classes, Spark, Arrow and the drivers do not."""
    code = "".join(
        f"from sluice.connectors.plugins import load_connector_class; load_connector_class({name!r})\n"
        for name in BUILTIN_CONNECTORS
    )
    packages, _ = _loaded(code)
    assert packages & {*SPARK, *ARROW, *DRIVERS} - {"sqlalchemy"} == set()


def test_the_rest_app_imports_no_spark_plugins_or_settings() -> None:
    packages, modules = _loaded("from sluice.worker.rest.app import create_app")
    assert packages & {*SPARK, *ARROW, *DRIVERS, "pydantic_settings", "uvicorn"} == set()
    assert "sluice.connectors.plugins" not in modules


def test_the_workflow_modules_import_no_runtime_code() -> None:
    """The workflow sandbox re-imports these: no Spark, SQL, pydantic or plugin code behind them."""
    code = (
        "import pkgutil, importlib, sluice.workflows as w\n"
        "for m in pkgutil.iter_modules(w.__path__):\n"
        "    importlib.import_module(f'sluice.workflows.{m.name}')\n"
    )
    packages, modules = _loaded(code)
    assert packages & {*SPARK, *ARROW, *DRIVERS, "pydantic", "pydantic_settings", "cryptography"} == set()
    assert {m.split(".")[1] for m in modules} == {"workflows"}


def test_validating_transforms_loads_arrow_never_spark() -> None:
    code = (
        "from sluice.worker.cli import main\n"
        "code = main(['connector', 'validate', '--set', 'connector.class=file-source',\n"
        "             '--set', 'file=/tmp/sluice-light-imports.txt', '--set', 'topic=t',\n"
        "             '--set', 'transforms=r', '--set', 'transforms.r.type=RegexRouter',\n"
        "             '--set', 'transforms.r.regex=t', '--set', 'transforms.r.replacement=u'])\n"
        "assert code == 0, code\n"
    )
    packages, _ = _loaded(code)
    assert "pyarrow" in packages and packages & {*SPARK, *DRIVERS} == set()


def test_the_connector_contract_loads_no_spark_converters_or_transforms() -> None:
    """A connector author's contract (connectors/api.py) is small: importing it loads the config
    model and the plain record and position types, not Spark, the converters or the transforms."""
    packages, modules = _loaded("import sluice.connectors.api")
    assert packages & {*SPARK, *DRIVERS} == set()
    heavy = ("sluice.connectors.converters", "sluice.connectors.transforms")
    assert not {m for m in modules if m.startswith(heavy)}
    assert len(modules) <= 10, sorted(modules)
