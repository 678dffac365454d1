"""The one SparkSession of a process.

A cold SparkSession costs ~7 s and a first job several more (docs/design.md), so a worker process (and
the test session) builds it once and every task reuses it; the master is configuration (local[*],
spark://…, k8s://… or a Spark Connect sc:// URL), never code: the caller hands it in from the
process's settings (worker.settings), so this module reads no configuration of its own.

Off ``local``, Python code runs in processes Sluice did not start: a cluster's executors, or the
Spark Connect server and its executors. They must import the same ``sluice`` the worker runs
(the data sources, the functions over Arrow batches), so the session ships it: a zip of the
installed ``sluice`` package added to the session's Python files (docs/spark-clusters.md).
"""

from __future__ import annotations

import atexit
import functools
import os
import py_compile
import re
import shutil
import socket
import sys
import tempfile
import threading
import zipfile
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_lock = threading.Lock()
_session: SparkSession | None = None

#: How long a worker waits for the master's port before refusing to start.
CONNECT_TIMEOUT_S = 5.0
#: Retries of a Spark Connect session's first calls (backing off up to 2 s).
STARTUP_RETRIES = 4
#: The ports Spark listens on when a master URL names none.
DEFAULT_PORTS = {"spark": 7077, "sc": 15002}
#: The folders of the ``sluice`` package (pyproject.toml maps each to a folder of the repository).
SHIPPED_PACKAGES = ("sluice", "sluice.activities", "sluice.connectors", "sluice.worker",
                    "sluice.workflows", "sluice.deploy")  # fmt: skip
#: Partitions of a shuffle: a micro-batch is small, and each task costs ~0.1-0.2 s on two cores.
SMALL_BATCH_PARTITIONS = "4"
#: Spark SQL settings every session gets, classic or Spark Connect (see get_spark for why each).
SESSION_CONF = {
    "spark.sql.shuffle.partitions": SMALL_BATCH_PARTITIONS,
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Driver-side sources hand Spark Arrow tables. Below this threshold Spark keeps them as a
    # LocalRelation: rows Java-serialised into every task and projections run interpreted by the
    # optimizer, which made a source batch cost ~2x (bench-pipeline). At 0 the Arrow batches are
    # decoded column-wise in the tasks, like any scan.
    "spark.sql.execution.arrow.localRelationThreshold": "0",
    "spark.sql.session.timeZone": "UTC",
}


#: The daemon local Python workers are forked from: PySpark's minus a fixed cost per task (see
#: the module). Not on a cluster: its executors start the daemon before a shipped zip is on the path.
LOCAL_PYTHON_DAEMON = "sluice.activities.python_daemon"


#: The lake formats a session can write, by the jar that brings each: its SQL extension and the
#: settings it needs (delta-sink, iceberg-sink). Iceberg catalogs are a sink's own (its config).
LAKE_FORMATS = {
    "delta-spark_": (
        "io.delta.sql.DeltaSparkSessionExtension",
        {
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
            # Delta rebuilds a table's state from its log in 50 tasks by default, at every commit
            # and MERGE: a 10-row MERGE took 15 s warm, 5 s with as many tasks as a shuffle's.
            "spark.databricks.delta.snapshotPartitions": SMALL_BATCH_PARTITIONS,
        },
    ),
    "iceberg-spark-runtime-": ("org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions", {}),
}


def jars_conf(jars: Sequence[str]) -> dict[str, str]:
    """The static settings a session with ``jars`` starts with: the jars, and the SQL extension
    (and settings) of each lake format among them, found by the jar's file name."""
    if not jars:
        return {}
    conf = {"spark.jars": ",".join(jars)}
    extensions = []
    for prefix, (extension, settings) in LAKE_FORMATS.items():
        if any(Path(j).name.startswith(prefix) for j in jars):
            extensions.append(extension)
            conf.update(settings)
    if extensions:
        conf["spark.sql.extensions"] = ",".join(extensions)
    return conf


class SparkMasterError(RuntimeError):
    """No session on the configured master: unreachable, refused, or not supported there. The
    message names the master and the setting, so a worker stops before it polls any task."""

    def __init__(self, master: str, problem: str) -> None:
        super().__init__(f"Spark master {master!r} (SLUICE_SPARK_MASTER): {problem}")
        self.master = master


def is_local_master(master: str) -> bool:
    """Whether the session runs in this process with local executors (``local``, ``local[n]``)."""
    return master.startswith("local")


def get_spark(
    master: str | None = None,
    *,
    driver_memory: str | None = None,
    app_name: str = "sluice-worker",
    jars: Sequence[str] = (),
) -> SparkSession:
    """Return the process's SparkSession, creating it on first use.

    The first call says where (``master``, ``driver_memory``, ``jars``: the caller's settings, e.g.
    ``RuntimeSettings``); later calls may omit them and get the same session. ``jars`` are added
    on a classic session only: a Spark Connect server has its own (docs/lake.md).
    """
    global _session
    with _lock:
        if _session is not None:
            _activate_for_this_thread(_session)
            return _session
        if master is None or driver_memory is None:
            raise RuntimeError("no SparkSession yet: the first get_spark call names the master and memory")
        check_reachable(master)
        # Python workers must run this interpreter (the venv with pyarrow and Sluice), not `python3`.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        try:
            if master.startswith("sc://"):
                session = _connect(master)
            else:
                session = _classic(master, app_name, driver_memory, jars)
        except Exception as exc:  # Py4J, gRPC or Spark's own: whatever, it names the cause
            _stop_half_started()
            raise SparkMasterError(master, f"no Spark session: {_first_line(exc)}") from exc
        _session = session
        return _session


def _classic(master: str, app_name: str, driver_memory: str, jars: Sequence[str]) -> SparkSession:
    """A session whose driver is this process's JVM (``local``, ``spark://``, ``k8s://``, ``yarn``)."""
    # pyspark: the CLI and REST server import this module (worker.settings -> activities.context)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.python.worker.reuse", "true")
        .config("spark.driver.memory", driver_memory)
        # PySpark's DataFrame debugging records the Python call site of every column function in
        # the JVM: five Py4J calls and a failed IPython import each, ~700 calls per sink batch's
        # plan. Sluice names a failing record and batch itself, never Spark's call site.
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
    )
    for key, value in {**SESSION_CONF, **jars_conf(jars)}.items():
        builder = builder.config(key, value)
    if is_local_master(master):  # a cluster's executors may have Sluice only as a shipped zip
        builder = builder.config("spark.python.daemon.module", LOCAL_PYTHON_DAEMON)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    _quiet_task_size_warnings(session)
    if not is_local_master(master):  # local Python workers run this very interpreter and install
        _ship_to_executors(session)
    return session


def _connect(master: str) -> SparkSession:
    """A Spark Connect session: the server is the driver; this process holds a gRPC client only.

    The server's own configuration decides memory, UI and Python workers; the SQL settings that
    shape results (time zone, Arrow) are the session's, set here as on a classic session.
    """
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.retries import DefaultPolicy

    # No appName: the server's application is the server's, and a builder option would be set by
    # an RPC inside getOrCreate, before the short retries below apply.
    session = SparkSession.builder.remote(master).getOrCreate()
    client = session.client  # type: ignore[operator]  # a Connect session's gRPC client (4.1's stubs)
    # The first calls are the start-up check: a port that answers but is no Connect server fails
    # them in seconds, not after the ten minutes of retries that later calls ride a restart out with.
    retries = client.get_retry_policies()
    client.set_retry_policies([DefaultPolicy(max_retries=STARTUP_RETRIES, max_backoff=2000)])
    try:
        for key, value in SESSION_CONF.items():
            session.conf.set(key, value)
        session.addArtifacts(str(sluice_archive()), pyfile=True)
    except BaseException:
        session.stop()  # release the server's session and the channel: nothing half-started
        raise
    finally:
        client.set_retry_policies(retries)
    return session


def check_reachable(master: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Refuse a ``spark://`` or ``sc://`` master none of whose addresses accepts a connection.

    Why up front: unreachable, a standalone master costs a minute of registration retries before
    Spark gives up, and a Connect client retries for minutes more, each with a message that names
    neither the address nor the setting. Other masters (``local``, ``k8s://``, ``yarn``) are left to
    Spark.
    """
    addresses = _master_addresses(master)
    if not addresses:
        return
    problems = []
    for host, port in addresses:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return
        except OSError as exc:
            problems.append(f"{host}:{port}: {exc.strerror or exc}")
    raise SparkMasterError(master, "unreachable (" + "; ".join(problems) + ")")


def _master_addresses(master: str) -> list[tuple[str, int]]:
    """``(host, port)`` of each master a ``spark://`` URL lists (several: standby masters) or of
    a ``sc://`` server; none for other masters."""
    scheme = master.split("://", 1)[0] if "://" in master else ""
    if scheme not in DEFAULT_PORTS:
        return []
    addresses = []
    for part in master.split("://", 1)[1].split("/", 1)[0].split(","):
        try:
            where = urlsplit(f"//{part}")
            port = where.port or DEFAULT_PORTS[scheme]
        except ValueError as exc:
            raise SparkMasterError(master, f"not a {scheme}:// URL ({exc})") from None
        if not where.hostname:
            raise SparkMasterError(master, f"not a {scheme}:// URL (no host)")
        addresses.append((where.hostname, port))
    return addresses


def _stop_half_started() -> None:
    """Stop a SparkContext a failed start left behind (a master that refused the application),
    so nothing keeps running for a session that does not exist."""
    try:
        from pyspark import SparkContext

        active = SparkContext._active_spark_context
        if active is not None:
            active.stop()
    except Exception:  # noqa: BLE001 - best effort on the way to the real error
        pass


def _first_line(exc: BaseException) -> str:
    """What went wrong, in a line: a Py4J error's own first line names only the Java call that
    failed, so the Java exception's is used; a gRPC error's is a header, so its details are."""
    cause = getattr(exc, "java_exception", None)
    text = str(cause if cause is not None else exc).strip()
    grpc_details = re.search(r'details = "([^"]*)"', text)
    if grpc_details:
        return grpc_details.group(1)
    return text.splitlines()[0] if text else type(exc).__name__


_UNCHECKED = py_compile.PycInvalidationMode.UNCHECKED_HASH


@functools.cache
def sluice_archive() -> Path:
    """A zip of the running ``sluice`` package (its modules and their bytecode), built once per process.

    Whatever way Sluice is installed here (the repository's editable install maps folders under
    ``sluice``; a wheel installs them as they are), the zip lays them out as the one package, so a
    Python worker that puts it on its path imports exactly the worker's code, ahead of any
    ``sluice`` installed there."""
    folder = Path(tempfile.mkdtemp(prefix="sluice-code-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    archive = folder / "sluice.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        for package in SHIPPED_PACKAGES:
            spec = find_spec(package)
            roots = list(spec.submodule_search_locations or []) if spec else []
            if not roots:
                raise RuntimeError(f"cannot ship {package}: not found as a package")
            inside = package.replace(".", "/")
            for source in sorted(Path(roots[0]).rglob("*.py")):
                relative = source.relative_to(roots[0])
                nested = relative.parts[0] if len(relative.parts) > 1 else ""
                if "__pycache__" in relative.parts or f"{package}.{nested}" in SHIPPED_PACKAGES:
                    continue  # a subpackage shipped from its own folder
                name = f"{inside}/{relative.as_posix()}"
                zipped.write(source, name)
                # Compiled beside it: zipimport cannot cache bytecode, so without it every Python
                # worker would compile what it imports (~0.5 s each on two busy cores). Unchecked:
                # the archive never changes; another Python version ignores it and compiles.
                compiled = folder / "compiled.pyc"
                py_compile.compile(
                    str(source), str(compiled), name, doraise=True, invalidation_mode=_UNCHECKED
                )
                zipped.write(compiled, name + "c")
    return archive


def _ship_to_executors(session: SparkSession) -> None:
    """Add ``sluice_archive`` to the Python files of the session's executors.

    ``addPyFile`` also puts the zip first on this process's ``sys.path``; the driver keeps
    importing its own installation (the same code), so the path is restored."""
    path = list(sys.path)
    try:
        session.sparkContext.addPyFile(str(sluice_archive()))
    finally:
        sys.path[:] = path


def _quiet_task_size_warnings(session: SparkSession) -> None:
    """Driver-built batches travel inside their tasks (localRelationThreshold=0, above), so every
    source batch would log "task of very large size"; that logger keeps its errors."""
    jvm = session._jvm
    assert jvm is not None  # a classic session (Spark Connect returns earlier)
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        "org.apache.spark.scheduler.TaskSetManager", jvm.org.apache.logging.log4j.Level.ERROR
    )


def started_spark() -> SparkSession | None:
    """The process's SparkSession if it has been made, else None, never waiting: a batch that runs
    in the worker's process does not wait for a session still starting (activities.warm_up)."""
    session = _session  # one read: the session is made once, under _lock, and never replaced
    if session is not None:
        _activate_for_this_thread(session)
    return session


def label_jobs(session: SparkSession, group: str, description: str) -> None:
    """Name the Spark jobs the calling thread starts next (a task's batch), for Spark's UI and logs.

    A classic session sets the thread's job group; a Spark Connect session has no SparkContext, so
    nothing is labelled there (its jobs still run)."""
    if getattr(session, "_jvm", None) is not None:
        session.sparkContext.setJobGroup(group, description)


def binds_jobs(session: SparkSession) -> bool:
    """Whether the calling thread can bind values to the jobs it starts (Spark local properties,
    which Spark sends with every task): a classic session only, since Spark Connect's client has
    no SparkContext. A plan built once and bound per batch needs it (the sink's met-schema
    batches, the source's bound reads); without it, each batch builds its plan."""
    return getattr(session, "_jvm", None) is not None


def _activate_for_this_thread(session: SparkSession) -> None:
    """Make the session the JVM's active one for the calling thread.

    Task activities run in worker threads, each pinned to its own JVM thread; Spark resolves a
    Python data source on write through the thread's active session, so without this a
    ``df.write.format("rocketmq")`` from a thread other than the creator's fails with
    DATA_SOURCE_NOT_FOUND.
    """
    jvm = getattr(session, "_jvm", None)
    if jvm is not None:  # classic Spark; Spark Connect sessions have no JVM here
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(session._jsparkSession)
