"""Sluice's own modules import one another without a cycle — counting imports inside functions too.

A function-local import can hide a cycle that a module-level one would make fail at import time;
both count here, so a cycle cannot come back behind one (imports that keep pyspark out of module
import time are of third-party modules and are not edges of this graph).
"""

from __future__ import annotations

import ast
from pathlib import Path

from sluice.deploy.local.config import REPO_ROOT

PACKAGES = ("workflows", "activities", "connectors", "worker", "deploy")


def _module_name(root: Path, path: Path) -> str:
    """``worker/cli.py`` -> ``sluice.worker.cli``: pyproject.toml maps the folders under ``sluice``."""
    parts = ["sluice", *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path = REPO_ROOT) -> dict[str, set[str]]:
    """Module -> the project modules it imports anywhere in its text (any depth, any branch)."""
    files = {_module_name(root, p): p for package in PACKAGES for p in (root / package).rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                # ``from pkg import sub`` imports the submodule ``pkg.sub`` when there is one.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            graph[name].update(t for t in targets if t in files and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_imports_inside_functions(tmp_path: Path) -> None:
    pkg = tmp_path / "connectors"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from sluice.connectors.b import x\n")
    (pkg / "b.py").write_text("def f():\n    from sluice.connectors import a\n    from . import c\n")
    (pkg / "c.py").write_text("")
    for package in PACKAGES:
        (tmp_path / package).mkdir(exist_ok=True)
    graph = import_graph(tmp_path)
    assert graph["sluice.connectors.b"] == {"sluice.connectors.a", "sluice.connectors.c"}
    assert cycles(graph) == [frozenset({"sluice.connectors.a", "sluice.connectors.b"})]


def test_no_import_cycles() -> None:
    graph = import_graph()
    sanity = graph["sluice.connectors.rocketmq.spark_reader"]
    assert "sluice.connectors.rocketmq.spark_options" in sanity
    assert [sorted(c) for c in cycles(graph)] == []


def test_layers_only_import_downwards() -> None:
    """workflows import no runtime code; activities and connectors never import the worker."""
    graph = import_graph()
    upward = {
        (module, target)
        for module, targets in graph.items()
        for target in targets
        if (
            module.startswith(("sluice.activities", "sluice.connectors"))
            and target.startswith("sluice.worker")
        )
        or (
            module.startswith("sluice.workflows")
            and target.startswith(("sluice.activities", "sluice.connectors", "sluice.worker"))
        )
    }
    assert upward == set()


#: What moves rows speaks Arrow and is bound to Spark in one place (activities.spark_binding), so
#: these import no PySpark anywhere — not at module level, inside a function or for type checking.
ARROW_ONLY = (
    "connectors/source_reads.py",
    "connectors/spark_json.py",
    "connectors/spark_schema.py",
    "connectors/jdbc",
    "connectors/cdc",
    "connectors/file",
    "connectors/dummy",
)


def test_connectors_that_move_rows_import_no_pyspark() -> None:
    found = []
    for entry in ARROW_ONLY:
        path = REPO_ROOT / entry
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            for node in ast.walk(ast.parse(file.read_text(), str(file))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                found += [
                    f"{file.relative_to(REPO_ROOT)}:{node.lineno} {n}"
                    for n in names
                    if n.startswith("pyspark")
                ]
    assert found == []


def test_every_import_of_our_code_says_sluice() -> None:
    """One module identity: nothing (code, tests, benchmarks) imports a folder by its bare name.

    ``import worker.cli`` would load a second copy of the module beside ``sluice.worker.cli`` (two
    sets of globals, two registries), so the bare names must not come back.
    """
    bare = []
    for folder in (*PACKAGES, "tests", "bench"):
        for path in (REPO_ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(), str(path))
            bare += [f"{path.relative_to(REPO_ROOT)}:{line} {name}" for line, name in _bare_imports(tree)]
    assert bare == []


def _bare_imports(tree: ast.AST, line: int | None = None) -> list[tuple[int, str]]:
    """Imports of a folder by its bare name, also in code held in strings (``python -c`` probes)."""
    found = []
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        found += [(line or node.lineno, n) for n in names if n.partition(".")[0] in PACKAGES]
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "import" in node.value:
            try:
                code = ast.parse(node.value)
            except SyntaxError:
                continue  # prose, not code
            found += _bare_imports(code, line or node.lineno)
    return found
