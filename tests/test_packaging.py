"""pyproject.toml maps every folder of the repository under ``sluice`` (one module identity).

The package list is explicit (setuptools can't find packages under a prefix), so a new folder with an
``__init__.py`` that is not listed would import in the editable install but be missing from the
wheel; this test names it. tests/client builds the sdist, the wheel from it, and installs it alone.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from sluice.deploy.local.config import REPO_ROOT

FOLDERS = ("workflows", "activities", "connectors", "worker", "deploy")


def _setuptools() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_each_folder_is_a_subpackage_of_sluice() -> None:
    package_dir = _setuptools()["package-dir"]
    assert package_dir == {"sluice": "deploy/packaging/sluice", **{f"sluice.{f}": f for f in FOLDERS}}


def test_every_package_in_the_tree_is_listed_and_every_listed_one_exists() -> None:
    config = _setuptools()
    in_tree = {
        "sluice." + ".".join(init.parent.relative_to(REPO_ROOT).parts)
        for folder in FOLDERS
        for init in (REPO_ROOT / folder).rglob("__init__.py")
        if "packaging" not in init.parts
    }
    data_only = {f"{package}" for package in config["package-data"] if package != "sluice"}
    listed = set(config["packages"])
    assert listed == {"sluice"} | in_tree | data_only

    def folder(package: str) -> Path:
        parts = package.split(".")[1:]
        return REPO_ROOT / "deploy/packaging/sluice" if not parts else REPO_ROOT.joinpath(*parts)

    assert [p for p in sorted(listed) if not folder(p).is_dir()] == []
