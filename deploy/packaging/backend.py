"""Sluice's in-tree build backend (pyproject.toml: ``backend-path = ["deploy/packaging"]``).

Why: the repository keeps its folders as top-level packages (``worker``, ``connectors`` …, what
the editable dev install and every test import), but an installed distribution must not claim such
generic names in a user's environment. So the *wheel* is built from a staged copy in which

1. the folders become subpackages of ``sluice`` (``sluice.worker``, ``sluice.connectors`` …) and
   ``deploy/packaging/sluice/__init__.py`` becomes ``sluice/__init__.py`` (the light client's API);
2. every absolute import of them (``from worker.x import``, also inside functions) and every string
   that names one of their modules (``"connectors.file.source:FileSourceConnector"`` in the plugin
   registry, ``python -m worker.cli``) gets the ``sluice.`` prefix;
3. pyproject.toml's console script and entry points get the same prefix and setuptools packages
   ``sluice*`` only.

Then setuptools builds the wheel from that copy. Editable installs and sdists are setuptools' own,
of the repository as it is (the dev layout). ``import x.y`` without ``as`` would bind ``sluice``,
not ``x``, after the rewrite, so the build refuses it, naming the file.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from setuptools import build_meta as _setuptools

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("workflows", "activities", "connectors", "worker", "deploy")
PREFIX = "sluice"
_NAMES = "|".join(PACKAGES)
_IMPORT = re.compile(rf"^(\s*)(from|import)(\s+)({_NAMES})(?=[.\s])", re.M)
_BARE_IMPORT = re.compile(rf"^\s*import\s+(?:{_NAMES})\.[\w.]+\s*(?:#.*)?$", re.M)
_STRING = re.compile(rf"(?<=[\"'])({_NAMES})\.(?=[A-Za-z_])")
_ENTRY = re.compile(rf'^([\w.-]+\s*=\s*")({_NAMES})\.', re.M)
_SECTION = re.compile(r"^\[(?P<name>[^\]]+)\]\n(?:(?!\[).*\n?)*", re.M)
_WHEEL_BUILD_SYSTEM = """[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

"""
_WHEEL_SETUPTOOLS = f"""[tool.setuptools.packages.find]
include = ["{PREFIX}", "{PREFIX}.*"]

[tool.setuptools.package-data]
"*" = ["py.typed", "*.xml"]

"""

# Everything but the wheel is setuptools' own, of the repository as it is.
get_requires_for_build_wheel = _setuptools.get_requires_for_build_wheel
get_requires_for_build_sdist = _setuptools.get_requires_for_build_sdist
build_sdist = _setuptools.build_sdist
get_requires_for_build_editable = _setuptools.get_requires_for_build_editable
prepare_metadata_for_build_editable = _setuptools.prepare_metadata_for_build_editable
build_editable = _setuptools.build_editable


def rewrite_source(text: str, where: str = "<source>") -> str:
    """One module's text with the repository's packages under ``sluice.`` (steps 1-2 above)."""
    bare = _BARE_IMPORT.search(text)
    if bare:
        statement = bare.group().strip()
        raise ValueError(f"{where}: `{statement}` cannot be moved under {PREFIX}; use `from … import`")
    text = _IMPORT.sub(rf"\1\2\3{PREFIX}.\4", text)
    return _STRING.sub(rf"{PREFIX}.\1.", text)


def rewrite_pyproject(text: str) -> str:
    """pyproject.toml for the staged copy: prefixed entry points, ``sluice*`` packages, plain setuptools."""

    def section(match: re.Match[str]) -> str:
        name = match.group("name")
        if name == "build-system":
            return _WHEEL_BUILD_SYSTEM
        if name.startswith("tool.setuptools"):
            return ""  # the dev layout's package finding; replaced below
        if name == "project.scripts" or name.startswith("project.entry-points"):
            return _ENTRY.sub(rf"\1{PREFIX}.\2.", match.group())
        return match.group()

    return _SECTION.sub(section, text).rstrip() + "\n\n" + _WHEEL_SETUPTOOLS


def stage(target: Path, root: Path = ROOT) -> None:
    """The staged copy the wheel is built from (see the module docstring)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")
    package = target / PREFIX
    shutil.copytree(root / "deploy" / "packaging" / PREFIX, package, ignore=ignore)
    for name in PACKAGES:
        skip = shutil.ignore_patterns("__pycache__", "*.pyc", ".*", "packaging")
        shutil.copytree(root / name, package / name, ignore=skip if name == "deploy" else ignore)
    for path in package.rglob("*.py"):
        path.write_text(rewrite_source(path.read_text(), str(path.relative_to(target))))
    shutil.copy2(root / "README.md", target / "README.md")
    (target / "pyproject.toml").write_text(rewrite_pyproject((root / "pyproject.toml").read_text()))


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    """The wheel of the staged copy (``metadata_directory`` is unused: no metadata hook is offered)."""
    out = os.path.abspath(wheel_directory)
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="sluice-wheel-") as tmp:
        stage(Path(tmp))
        os.chdir(tmp)
        try:
            return str(_setuptools.build_wheel(out, config_settings))
        finally:
            os.chdir(cwd)
