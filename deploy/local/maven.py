"""Jars from Maven Central for the stack's Java services: ``mvn dependency:copy-dependencies`` of a
pom kept in ``deploy/<service>/``, once per pom content.

One fetcher for every Java service (RocketMQ, OpenSearch): Maven resolves, verifies and caches the
artifacts (``~/.m2``), and a stamp holding the pom's SHA-256 makes later starts skip it.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from sluice.deploy.local.process import StackError

STAMP = ".pom-sha256"


def copy_dependencies(service: str, pom: Path, out: Path, args: Sequence[str] = ()) -> Path:
    """The dependencies of ``pom`` copied into ``out`` (``args``: more ``-D`` options, such as
    ``-DincludeGroupIds=…``), unless ``out`` already holds them for this pom and these options.
    Errors name the service and the pom."""
    stamp = out / STAMP
    digest = hashlib.sha256(pom.read_bytes() + "\0".join(args).encode()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest:
        return out
    mvn = shutil.which("mvn")
    if not mvn:
        raise StackError(f"{service}: Maven (`mvn`) is missing; install it with `apt-get install -y maven`")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    result = subprocess.run(
        [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies", f"-DoutputDirectory={out}", *args],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise StackError(
            f"{service}: Maven could not resolve the jars of {pom}: "
            f"{result.stdout[-800:]}{result.stderr[-400:]}"
        )
    stamp.write_text(digest)
    return out
