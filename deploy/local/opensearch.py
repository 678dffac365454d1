"""OpenSearch 2.19 as one local node, assembled from Maven Central jars (the ``opensearch-sink``'s target).

No release archive can be downloaded here, so the node is laid out by hand under ``<state>/opensearch``
the way a distribution would be, from the jars Maven resolves with ``deploy/opensearch/pom.xml``:

* ``lib/`` — the server and its libraries (the class path of ``java -cp``);
* ``modules/transport-netty4/`` — the HTTP and transport layers, loaded by the server's plugin
  service from their own class loader (a distribution's module, not on the class path: OpenSearch's
  jar-hell check refuses a class found twice). The artifact on Maven Central is the module's jar
  without the descriptor and security policy its release zip carries, so both are written here;
* ``config/`` — ``opensearch.yml`` (127.0.0.1, single-node discovery, no security plugin at all),
  ``log4j2.properties`` (to the console, i.e. ``<state>/logs/opensearch.log``) and the keystore
  the server creates on first start;
* ``data/``, ``logs/``, ``tmp/``, and the empty ``bin/`` and ``plugins/`` the server expects.

The main class is the distribution's own, ``org.opensearch.bootstrap.OpenSearch`` (security
manager on, as in a release). 2.19.x is the newest line that runs on Java 17 (3.x needs Java 21).
OpenSearch refuses to run as root; started as root (this project's machines), the node runs as
``nobody`` (``setpriv``) and owns only its own folders, as the stack's MariaDB runs as ``mysql``.
Binding to loopback keeps the server in development mode: its production checks (file
descriptors, ``vm.max_map_count``) are warnings in its log, not failures.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Final

from sluice.deploy.local.config import REPO_ROOT, StackConfig
from sluice.deploy.local.maven import copy_dependencies
from sluice.deploy.local.process import ManagedProcess, StackError, ensure_port_free, wait_until
from sluice.deploy.local.rocketmq import java_binary

SERVICE: Final = "opensearch"
POM: Final = REPO_ROOT / "deploy" / "opensearch" / "pom.xml"
VERSION: Final = "2.19.6"
HEAP: Final = "512m"
#: The user the node runs as when the stack is started as root.
RUN_AS: Final = "nobody"
#: Group ids of the module's jars (the rest of the pom's dependencies is the server's class path).
_MODULE_GROUPS: Final = "io.netty,org.opensearch.plugin"
NETTY_MODULE: Final = "transport-netty4"

# The module's plugin descriptor and the permissions its release zip grants it (netty opens and
# accepts sockets and sets its threads' context class loader).
_DESCRIPTOR: Final = f"""\
description=Netty 4 based transport implementation
version={VERSION}
name={NETTY_MODULE}
classname=org.opensearch.transport.Netty4Plugin
java.version=11
opensearch.version={VERSION}
extended.plugins=
has.native.controller=false
"""
_POLICY: Final = """\
grant {
  permission java.io.FilePermission "/proc/sys/net/core/somaxconn", "read";
  permission java.net.SocketPermission "*", "accept,connect";
  permission java.lang.RuntimePermission "*", "setContextClassLoader";
  permission java.lang.RuntimePermission "getClassLoader";
  permission java.util.PropertyPermission "sun.nio.ch.bugLevel", "write";
};
"""
_LOG4J: Final = """\
status = error
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d{ISO8601}][%-5p][%-25c{1.}] [%node_name]%marker %m%n
rootLogger.level = info
rootLogger.appenderRef.console.ref = console
logger.deprecation.name = org.opensearch.deprecation
logger.deprecation.level = error
"""


def home(cfg: StackConfig) -> Path:
    return cfg.state_dir / "opensearch"


def lib_dir(cfg: StackConfig) -> Path:
    return home(cfg) / "lib"


def module_dir(cfg: StackConfig) -> Path:
    return home(cfg) / "modules" / NETTY_MODULE


def ensure_jars(cfg: StackConfig) -> Path:
    """The server's jars in ``lib/`` and the netty module's in ``modules/transport-netty4/`` (once
    per pom content), with the module's descriptor and policy."""
    copy_dependencies(SERVICE, POM, lib_dir(cfg), [f"-DexcludeGroupIds={_MODULE_GROUPS}"])
    module = copy_dependencies(SERVICE, POM, module_dir(cfg), [f"-DincludeGroupIds={_MODULE_GROUPS}"])
    (module / "plugin-descriptor.properties").write_text(_DESCRIPTOR)
    (module / "plugin-security.policy").write_text(_POLICY)
    return lib_dir(cfg)


def _settings(cfg: StackConfig) -> dict[str, object]:
    base = home(cfg)
    return {
        "cluster.name": "sluice-local",
        "node.name": "sluice-local",
        "network.host": cfg.host,
        "http.port": cfg.opensearch_port,
        "transport.port": cfg.opensearch_transport_port,
        "discovery.type": "single-node",
        "path.data": str(base / "data"),
        "path.logs": str(base / "logs"),
        # A development disk is often fuller than the 85/90/95 % watermarks; past the last one
        # the node makes every index read-only, which would look like a sink failure.
        "cluster.routing.allocation.disk.threshold_enabled": False,
    }


class OpenSearch:
    def __init__(self, cfg: StackConfig) -> None:
        self.cfg = cfg
        self.proc = ManagedProcess(SERVICE, cfg.state_dir)

    def _layout(self) -> None:
        base = home(self.cfg)
        for sub in ("config", "data", "logs", "tmp", "bin", "plugins"):
            (base / sub).mkdir(parents=True, exist_ok=True)
        # YAML is a superset of JSON: one ``key: value`` line per setting, values JSON-quoted.
        yml = "".join(f"{k}: {json.dumps(v)}\n" for k, v in _settings(self.cfg).items())
        (base / "config" / "opensearch.yml").write_text(yml)
        (base / "config" / "log4j2.properties").write_text(_LOG4J)
        if os.geteuid() == 0:
            entry = pwd.getpwnam(RUN_AS)
            for folder in (self.cfg.state_dir, base):  # let the node's user reach its home
                folder.chmod(folder.stat().st_mode | 0o711)
            for sub in ("config", "data", "logs", "tmp"):  # what the node writes (config: keystore)
                for p in [base / sub, *(base / sub).rglob("*")]:
                    os.chown(p, entry.pw_uid, entry.pw_gid)

    def argv(self) -> list[str]:
        base = home(self.cfg)
        java = [
            java_binary(SERVICE),
            f"-Xms{HEAP}",
            f"-Xmx{HEAP}",
            "-XX:+UseG1GC",
            "-Xss1m",
            "-Dfile.encoding=UTF-8",
            "-Djava.awt.headless=true",
            f"-Djava.io.tmpdir={base / 'tmp'}",
            "-Dlog4j2.formatMsgNoLookups=true",
            "-Dlog4j.shutdownHookEnabled=false",
            "-Dlog4j2.disable.jmx=true",
            # Java 17 warns but allows the security manager the bootstrap installs.
            "-Djava.security.manager=allow",
            f"-Dopensearch.path.home={base}",
            f"-Dopensearch.path.conf={base / 'config'}",
            "-Dopensearch.distribution.type=tar",
            "-Dopensearch.bundled_jdk=false",
            "-cp",
            f"{lib_dir(self.cfg)}/*",
            "org.opensearch.bootstrap.OpenSearch",
        ]
        if os.geteuid() != 0:
            return java
        setpriv = shutil.which("setpriv")
        if not setpriv:
            raise StackError(f"{SERVICE}: OpenSearch refuses root and `setpriv` (util-linux) is missing")
        return [setpriv, f"--reuid={RUN_AS}", "--regid=nogroup", "--clear-groups", *java]

    def start(self) -> None:
        if self.healthy():
            return
        ensure_port_free(SERVICE, self.cfg.host, self.cfg.opensearch_port, "SLUICE_OPENSEARCH_PORT")
        ensure_port_free(
            f"{SERVICE} transport",
            self.cfg.host,
            self.cfg.opensearch_transport_port,
            "SLUICE_OPENSEARCH_PORT",
        )
        ensure_jars(self.cfg)
        self._layout()
        self.proc.start(self.argv(), env={"OPENSEARCH_PATH_CONF": str(home(self.cfg) / "config")})
        wait_until(self.healthy, service=SERVICE, proc=self.proc, timeout_s=120, interval_s=1)

    def cluster_status(self, timeout_s: float = 2.0) -> str | None:
        """The cluster's health colour (``green``, ``yellow``, ``red``), or None when it does not answer."""
        url = f"{self.cfg.opensearch_url}/_cluster/health"
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as response:
                return str(json.load(response).get("status"))
        except (OSError, ValueError, urllib.error.URLError):
            return None

    def healthy(self) -> bool:
        """Running and answering: one node is green, or yellow (replicas it cannot place: a
        single node never can)."""
        return self.proc.is_running() and self.cluster_status() in ("green", "yellow")

    def stop(self) -> None:
        # SIGTERM is the node's clean shutdown (flushes its shards).
        self.proc.stop(timeout_s=60)
