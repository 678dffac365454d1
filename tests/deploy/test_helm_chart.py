"""The Helm chart (deploy/helm/sluice) and the worker image (deploy/container/Containerfile), offline.

The chart is rendered by a real ``helm`` (built by deploy/local/helm.py) with its defaults, with the
production example and with a chart-made Secret; every manifest must validate against the
Kubernetes 1.30 schemas that the ``kubernetes-validate`` package bundles (strictly: an unknown or
misspelled field fails). Bad values must stop ``helm`` before anything is rendered, naming the value.
The Containerfile cannot be built here (no image registry), so it is checked against the
repository: what it copies exists, it copies every package, and it agrees with the chart.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from sluice.deploy.local.lake import FORMAT_GROUPS, POM

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "sluice"
PRODUCTION_VALUES = CHART / "values-production.yaml"
CONTAINERFILE = REPO / "deploy" / "container" / "Containerfile"
#: The Kubernetes version the manifests are validated against (and rendered for).
KUBE_VERSION = "1.30.0"
#: Kinds from CRDs, whose schemas kubernetes-validate does not bundle: checked by the tests below.
CRD_KINDS = {("monitoring.coreos.com/v1", "PodMonitor")}
RELEASE = "sluice"
#: The first test waits for helm to be built on a machine without it (deploy.local.helm.BUILD_TIMEOUT_S).
pytestmark = pytest.mark.timeout(900)

#: A Fernet key (`sluice keygen`) and a database password that must never leave the Secret.
FERNET_KEY = "x" * 43 + "="
DB_PASSWORD = "pw-9f3b1c2a"
CHART_MADE_SECRET = [
    "--set",
    "secrets.existingSecret=",
    "--set",
    f"secrets.values.databaseUrl=postgresql+psycopg://sluice:{DB_PASSWORD}@pg.db.svc:5432/sluice",
    "--set",
    f"secrets.values.secretsKey={FERNET_KEY}",
    "--set",
    "secrets.values.restToken=token-4e1d",
    "--set",
    "metrics.podMonitor.enabled=true",
]


def load_values(*files: Path) -> dict[str, Any]:
    """The chart's values merged with ``files`` (maps merged key by key, as helm does)."""

    def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
        merged = dict(base)
        for key, value in over.items():
            both_maps = isinstance(value, dict) and isinstance(base.get(key), dict)
            merged[key] = merge(base[key], value) if both_maps else value
        return merged

    values: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    for path in files:
        values = merge(values, yaml.safe_load(path.read_text()))
    return values


def helm(helm_binary: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helm_binary), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def render(helm_binary: Path, env: dict[str, str], *args: str) -> list[dict[str, Any]]:
    result = helm(helm_binary, env, "template", RELEASE, str(CHART), "--kube-version", KUBE_VERSION, *args)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def only(manifests: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [m for m in manifests if m["kind"] == kind and m["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, got {[m['metadata']['name'] for m in found]}"
    return found[0]


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    (only_container,) = deployment["spec"]["template"]["spec"]["containers"]
    return only_container


def env_of(deployment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container(deployment)["env"]}


#: name -> (extra helm arguments, values files as helm sees them)
RENDERINGS: dict[str, tuple[list[str], list[Path]]] = {
    "defaults": ([], []),
    "production": (["-f", str(PRODUCTION_VALUES)], [PRODUCTION_VALUES]),
    "chart-made-secret": (CHART_MADE_SECRET, []),
}


@pytest.fixture(scope="module", params=list(RENDERINGS))
def rendering(
    request: pytest.FixtureRequest, helm_binary: Path, helm_env: dict[str, str]
) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """(name, rendered manifests, the values they were rendered from)."""
    args, files = RENDERINGS[request.param]
    values = load_values(*files)
    if request.param == "chart-made-secret":
        values["secrets"]["existingSecret"] = ""
    return request.param, render(helm_binary, helm_env, *args), values


def test_every_manifest_validates_against_the_kubernetes_schemas(
    rendering: tuple[str, list[dict[str, Any]], dict[str, Any]],
) -> None:
    name, manifests, _ = rendering
    kinds = {(m["apiVersion"], m["kind"]) for m in manifests}
    assert {("apps/v1", "Deployment"), ("v1", "Service"), ("v1", "ConfigMap")} <= kinds
    problems = []
    for manifest in manifests:
        if (manifest["apiVersion"], manifest["kind"]) in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(manifest, KUBE_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            problems.append(f"{manifest['kind']}/{manifest['metadata']['name']}: {exc.message}")
    assert not problems, f"{name}: " + "; ".join(problems)


def test_workers_stop_gracefully_with_their_resources_probes_and_metrics(
    rendering: tuple[str, list[dict[str, Any]], dict[str, Any]],
) -> None:
    _, manifests, values = rendering
    worker = only(manifests, "Deployment", f"{RELEASE}-worker")
    pod = worker["spec"]["template"]
    main = container(worker)

    assert worker["spec"]["replicas"] == values["worker"]["replicas"]
    assert main["args"] == ["worker"]
    # Longer than a batch (a minute or two) plus the worker's own 20 s graceful shutdown.
    assert pod["spec"]["terminationGracePeriodSeconds"] == values["worker"]["terminationGracePeriodSeconds"]
    assert pod["spec"]["terminationGracePeriodSeconds"] >= 120
    assert main["resources"]["requests"] == values["worker"]["resources"]["requests"]
    assert {"cpu", "memory"} <= main["resources"]["requests"].keys()

    metrics_port = values["metrics"]["port"]
    env = env_of(worker)
    assert env["SLUICE_METRICS_PORT"]["value"] == str(metrics_port)
    assert env["SLUICE_METRICS_HOST"]["value"] == "0.0.0.0"  # probed and scraped from outside the pod
    assert main["ports"] == [{"name": "metrics", "containerPort": metrics_port, "protocol": "TCP"}]
    for probe in ("livenessProbe", "readinessProbe"):
        assert main[probe]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    # A standalone cluster's executors connect back to the worker (the driver) at the pod's IP.
    if values["spark"]["master"].startswith("spark://"):
        assert env["SPARK_LOCAL_HOSTNAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    else:
        assert "SPARK_LOCAL_HOSTNAME" not in env
    annotations = pod["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == str(metrics_port)
    assert annotations["prometheus.io/path"] == "/metrics"


def test_secrets_come_from_the_secret_and_never_from_the_configmap(
    rendering: tuple[str, list[dict[str, Any]], dict[str, Any]],
) -> None:
    name, manifests, values = rendering
    secret_name = values["secrets"]["existingSecret"] or f"{RELEASE}-secrets"
    keys = values["secrets"]["keys"]
    config = only(manifests, "ConfigMap", RELEASE)
    secret_settings = {"SLUICE_DATABASE_URL", "SLUICE_SECRETS_KEY", "SLUICE_PAYLOAD_KEY", "SLUICE_REST_TOKEN"}
    assert not secret_settings & config["data"].keys()
    assert config["data"]["SLUICE_TEMPORAL_ADDRESS"] == values["temporal"]["address"]
    assert config["data"]["SLUICE_NAMESRV"] == values["rocketmq"]["namesrv"]

    expected = {
        f"{RELEASE}-worker": {
            "SLUICE_DATABASE_URL": keys["databaseUrl"],
            "SLUICE_SECRETS_KEY": keys["secretsKey"],
            "SLUICE_PAYLOAD_KEY": keys["payloadKey"],
        },
        # The REST server reaches the store through the workers: no database URL.
        f"{RELEASE}-rest": {
            "SLUICE_SECRETS_KEY": keys["secretsKey"],
            "SLUICE_PAYLOAD_KEY": keys["payloadKey"],
            "SLUICE_REST_TOKEN": keys["restToken"],
        },
    }
    for deployment_name, wanted in expected.items():
        deployment = only(manifests, "Deployment", deployment_name)
        assert container(deployment)["envFrom"] == [{"configMapRef": {"name": RELEASE}}]
        from_secret = {
            e["name"]: e["valueFrom"]["secretKeyRef"]
            for e in container(deployment)["env"]
            if "secretKeyRef" in e.get("valueFrom", {})
        }
        assert {env: ref["key"] for env, ref in from_secret.items()} == wanted, deployment_name
        assert {ref["name"] for ref in from_secret.values()} == {secret_name}

    secrets = [m for m in manifests if m["kind"] == "Secret"]
    if name != "chart-made-secret":
        assert secrets == []  # the operator's own Secret is used, not overwritten
        return
    (secret,) = secrets
    assert secret["metadata"]["name"] == secret_name
    assert DB_PASSWORD in secret["stringData"][keys["databaseUrl"]]
    assert secret["stringData"][keys["secretsKey"]] == FERNET_KEY
    for manifest in manifests:
        if manifest is not secret:
            text = json.dumps(manifest)
            assert DB_PASSWORD not in text and FERNET_KEY not in text, manifest["kind"]


def test_rest_server_deployment_and_service(
    rendering: tuple[str, list[dict[str, Any]], dict[str, Any]],
) -> None:
    _, manifests, values = rendering
    rest = only(manifests, "Deployment", f"{RELEASE}-rest")
    service = only(manifests, "Service", f"{RELEASE}-rest")
    main = container(rest)
    port = values["rest"]["port"]

    assert rest["spec"]["replicas"] == values["rest"]["replicas"]
    assert main["args"] == ["rest"]
    assert env_of(rest)["SLUICE_REST_HOST"]["value"] == "0.0.0.0"
    assert env_of(rest)["SLUICE_REST_PORT"]["value"] == str(port)
    assert main["ports"] == [{"name": "http", "containerPort": port, "protocol": "TCP"}]
    assert main["resources"]["requests"] == values["rest"]["resources"]["requests"]
    # The Service reaches exactly the REST pods, on their named port.
    pod_labels = rest["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "rest"
    assert service["spec"]["ports"] == [
        {"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}
    ]
    # GET / answers from memory, but needs the token when reads are authenticated.
    for probe in ("livenessProbe", "readinessProbe"):
        if values["rest"]["authReads"]:
            assert main[probe]["tcpSocket"] == {"port": "http"}
        else:
            assert main[probe]["httpGet"] == {"path": "/", "port": "http"}


def test_pod_monitor_scrapes_both_components_when_enabled(
    helm_binary: Path, helm_env: dict[str, str]
) -> None:
    manifests = render(helm_binary, helm_env, *CHART_MADE_SECRET)
    (monitor,) = [m for m in manifests if m["kind"] == "PodMonitor"]
    assert {e["port"] for e in monitor["spec"]["podMetricsEndpoints"]} == {"metrics", "http"}
    selector = monitor["spec"]["selector"]["matchLabels"]
    for deployment in (f"{RELEASE}-worker", f"{RELEASE}-rest"):
        labels = only(manifests, "Deployment", deployment)["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= labels.items()
    assert not [m for m in render(helm_binary, helm_env) if m["kind"] == "PodMonitor"]


def test_grace_period_and_replicas_follow_the_values(helm_binary: Path, helm_env: dict[str, str]) -> None:
    manifests = render(
        helm_binary,
        helm_env,
        "--set",
        "worker.terminationGracePeriodSeconds=300",
        "--set",
        "worker.replicas=7",
        "--set",
        "rest.enabled=false",
    )
    worker = only(manifests, "Deployment", f"{RELEASE}-worker")
    assert worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 300
    assert worker["spec"]["replicas"] == 7
    assert not [m for m in manifests if m["metadata"]["name"] == f"{RELEASE}-rest"]


def test_a_settings_change_restarts_the_pods(helm_binary: Path, helm_env: dict[str, str]) -> None:
    """Sluice reads its settings once, at start: a changed ConfigMap must roll the pods."""

    def checksum(*args: str) -> str:
        worker = only(render(helm_binary, helm_env, *args), "Deployment", f"{RELEASE}-worker")
        return str(worker["spec"]["template"]["metadata"]["annotations"]["checksum/config"])

    assert checksum() == checksum()
    assert checksum() != checksum("--set", "temporal.address=temporal.other.svc:7233")


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--set", "worker.replicas=-1"], "/worker/replicas"),
        (["--set-string", "worker.replicas=two"], "/worker/replicas"),
        (["--set", "temporal.address=null"], "missing property 'address'"),
        (["--set", "temporal.address="], "/temporal/address"),
        (["--set", "rocketmq.namesrv=no-port"], "/rocketmq/namesrv"),
        (["--set", "worker.terminationGracePeriodSeconds=10"], "/worker/terminationGracePeriodSeconds"),
        (["--set", "worker.replica=3"], "'replica'"),  # a misspelt setting is not ignored
        (["--set", "spark.master=spark-master:7077"], "/spark/master"),
        (["--set", "secrets.existingSecret="], "/secrets/values/databaseUrl"),
        (
            [*CHART_MADE_SECRET, "--set", "secrets.values.secretsKey=not-a-fernet-key"],
            "/secrets/values/secretsKey",
        ),
    ],
)
def test_an_invalid_value_is_refused_naming_it_and_nothing_is_rendered(
    helm_binary: Path, helm_env: dict[str, str], args: list[str], named: str
) -> None:
    result = helm(
        helm_binary, helm_env, "template", RELEASE, str(CHART), "--kube-version", KUBE_VERSION, *args
    )
    assert result.returncode != 0
    assert result.stdout == ""  # not one manifest: an install would create nothing
    assert "values don't meet the specifications of the schema" in result.stderr
    assert named in result.stderr


@pytest.mark.parametrize("values_files", [[], [PRODUCTION_VALUES]], ids=["defaults", "production"])
def test_helm_lint_passes(helm_binary: Path, helm_env: dict[str, str], values_files: list[Path]) -> None:
    args = [arg for path in values_files for arg in ("-f", str(path))]
    result = helm(helm_binary, helm_env, "lint", "--strict", str(CHART), *args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


def test_helm_lint_fails_on_an_invalid_value(helm_binary: Path, helm_env: dict[str, str]) -> None:
    result = helm(helm_binary, helm_env, "lint", "--strict", str(CHART), "--set", "worker.replicas=-1")
    assert result.returncode != 0
    assert "/worker/replicas" in result.stdout


# --- The Containerfile ----------------------------------------------------------------------------


def instructions(path: Path) -> Iterator[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, continuation lines joined, comments dropped."""
    logical = ""
    for line in path.read_text().splitlines():
        if not logical and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            logical += line.rstrip()[:-1] + " "
            continue
        logical += line
        keyword, _, rest = logical.strip().partition(" ")
        yield keyword.upper(), rest.strip()
        logical = ""


def stages() -> list[list[tuple[str, str]]]:
    """The Containerfile's build stages, each starting at its FROM."""
    result: list[list[tuple[str, str]]] = []
    for keyword, args in instructions(CONTAINERFILE):
        if keyword == "FROM":
            result.append([])
        if result:
            result[-1].append((keyword, args))
    return result


def pyproject() -> dict[str, Any]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def copy_sources() -> list[str]:
    """What the build copies from the repository (not from another stage)."""
    sources = []
    for stage in stages():
        for keyword, args in stage:
            if keyword == "COPY" and "--from=" not in args:
                *paths, _destination = args.split()
                sources.extend(paths)
    return sources


def test_containerfile_copies_only_what_exists_and_every_package() -> None:
    sources = copy_sources()
    assert sources
    missing = [s for s in sources if not (REPO / s).exists()]
    assert not missing, f"COPY sources not in the repository: {missing}"

    project = pyproject()
    package_dir: dict[str, str] = project["tool"]["setuptools"]["package-dir"]
    packages: list[str] = project["tool"]["setuptools"]["packages"]
    assert packages
    # A package's folder: the longest package-dir entry it is in, plus the rest of its dotted name.
    for package in packages:
        root = max(
            (name for name in package_dir if package == name or package.startswith(f"{name}.")), key=len
        )
        folder = Path(package_dir[root], *package.removeprefix(root).split(".")[1:])
        assert (REPO / folder).is_dir(), folder
        data = project["tool"]["setuptools"].get("package-data", {}).get(package, [])
        files = [*(REPO / folder).glob("*.py"), *(REPO / folder / name for name in data)]
        assert files, f"package {package} ({folder}) has no files"
        for file in files:
            relative = file.relative_to(REPO)
            copied = any(relative == Path(s) or Path(s) in relative.parents for s in sources)
            assert copied, f"{relative} (package {package}) is not copied into the image"
    assert project["project"]["readme"] in sources  # setuptools reads it to build the package


def test_containerfile_runs_the_sluice_script_on_python_311_and_java_17() -> None:
    *_, final = stages()
    project = pyproject()
    (entrypoint,) = [json.loads(args) for keyword, args in final if keyword == "ENTRYPOINT"]
    assert entrypoint[-1] == "sluice" and "sluice" in project["project"]["scripts"]
    assert entrypoint[0].endswith("tini")  # PID 1 forwards SIGTERM: the worker finishes its batches

    run = " ".join(args for keyword, args in final if keyword == "RUN")
    assert re.search(r"apt-get install .*\bopenjdk-17-jre-headless\b", run)

    base = next(args for keyword, args in instructions(CONTAINERFILE) if keyword == "ARG")
    assert re.search(r"python:3\.11-slim-bookworm$", base)  # bookworm: the Debian that has Java 17
    assert "3.11" in project["project"]["requires-python"]

    install = next(
        args for stage in stages() for keyword, args in stage if keyword == "RUN" and "'.[" in args
    )
    extras = re.findall(r"'\.\[(\w+)\]'", install)
    assert extras == ["worker"] and "worker" in project["project"]["optional-dependencies"]


def test_containerfile_agrees_with_the_chart() -> None:
    """The chart's user, state directory and ports are the image's."""
    *_, final = stages()
    values = load_values()
    user = next(args for keyword, args in final if keyword == "USER")
    assert user == f"{values['podSecurityContext']['runAsUser']}:{values['podSecurityContext']['runAsGroup']}"
    workdir = next(args for keyword, args in final if keyword == "WORKDIR")
    assert workdir == values["stateDir"]
    env = " ".join(args for keyword, args in final if keyword == "ENV")
    assert f"SLUICE_STATE_DIR={values['stateDir']}" in env
    exposed = {int(p) for keyword, args in final if keyword == "EXPOSE" for p in args.split()}
    assert exposed == {values["rest"]["port"], values["metrics"]["port"]}


def test_the_image_carries_the_lake_jars_the_stack_fetches() -> None:
    """delta-sink and iceberg-sink work in the image: its jars come from the stack's lake pom with
    the stack's groups, and the worker's session finds them (``SLUICE_SPARK_JARS``)."""
    *builds, final = stages()
    fetches = [args for stage in builds for keyword, args in stage if keyword == "RUN" and "mvn " in args]
    assert len(fetches) == 1
    (fetch,) = fetches
    pom = next(
        args.split()
        for stage in builds
        for keyword, args in stage
        if keyword == "COPY" and args.startswith(str(POM.relative_to(REPO)))
    )
    assert f"-f {pom[-1]} dependency:copy-dependencies" in fetch
    assert f"-DincludeGroupIds={FORMAT_GROUPS}" in fetch.split()
    out = re.search(r"-DoutputDirectory=(\S+)", fetch)
    assert out is not None
    env = " ".join(args for keyword, args in final if keyword == "ENV")
    jars = re.search(r"SLUICE_SPARK_JARS=(\S+)", env)
    assert jars is not None
    copies = [args.split() for keyword, args in final if keyword == "COPY" and "--from=" in args]
    assert ["--from=lake-jars", out.group(1), jars.group(1)] in copies
