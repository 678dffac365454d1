"""The lake formats' Spark jars (Delta Lake, Iceberg's Spark runtime) from Maven Central.

Not a service: ``delta-sink`` and ``iceberg-sink`` run inside the worker's SparkSession, which puts
these jars on its classpath (``SLUICE_SPARK_JARS``, default this folder; activities.spark). Only
the formats' own artifacts are copied: their poms leave Spark ``provided``, and the libraries they
share with Spark (Hadoop, Parquet, Jackson, Scala) are Spark's own (deploy/lake/pom.xml).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from sluice.deploy.local.config import REPO_ROOT, StackConfig
from sluice.deploy.local.maven import copy_dependencies

POM: Final = REPO_ROOT / "deploy" / "lake" / "pom.xml"
#: Group ids of what Spark does not ship: the formats and nothing else.
FORMAT_GROUPS: Final = "io.delta,org.apache.iceberg"


def jar_dir(state_dir: Path) -> Path:
    """Where the local stack keeps the lake jars (the default of ``SLUICE_SPARK_JARS``)."""
    return state_dir / "spark-jars"


def ensure_jars(cfg: StackConfig) -> Path:
    """The lake jars in ``jar_dir``, fetched once per pom content."""
    return copy_dependencies("lake jars", POM, jar_dir(cfg.state_dir), [f"-DincludeGroupIds={FORMAT_GROUPS}"])
