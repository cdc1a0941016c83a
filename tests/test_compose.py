"""Static checks of the distributed topology: docker-compose.yml, Dockerfile, deploy/ configs.

Docker cannot run here, so these tests hold the files to what the code really offers: every
``MEMSTREAM_*`` variable is a Settings field, every command is a declared console script,
every reference (depends_on, scrape target, datasource, volume, mount) resolves.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from memstream.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
PROMETHEUS = ROOT / "deploy" / "prometheus" / "prometheus.yml"
GRAFANA = ROOT / "deploy" / "grafana"
MEMSTREAM_SERVICES = {
    "memstream-sequencer": "memstream-sequencer",
    "memstream-archiver": "memstream-archiver",
    "memstream-api": "memstream-api",
    "memstream-retrospective": "memstream-retrospective",
    "memstream-latents": "memstream-latents",
}
DEPENDS_CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
ENV_PREFIX = str(Settings.model_config.get("env_prefix", ""))
_INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}")


# ---------------------------------------------------------------- helpers


def env_to_field(name: str) -> str:
    """``MEMSTREAM_FOO_BAR`` → ``foo_bar`` (pydantic-settings is case-insensitive)."""
    if not name.upper().startswith(ENV_PREFIX.upper()):
        raise ValueError(f"{name} does not start with {ENV_PREFIX}")
    return name[len(ENV_PREFIX) :].lower()


def unknown_settings_vars(names: set[str]) -> list[str]:
    """The ``MEMSTREAM_*`` names that are not fields of :class:`Settings`."""
    return sorted(n for n in names if env_to_field(n) not in Settings.model_fields)


def memstream_vars(node: Any) -> set[str]:
    """Every ``MEMSTREAM_*`` variable set anywhere in a parsed YAML document.

    Covers mapping-style environments (keys) and list-style ones (``"MEMSTREAM_X=1"``).
    """
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(key, str) and key.startswith(ENV_PREFIX):
                found.add(key)
            found |= memstream_vars(value)
    elif isinstance(node, list):
        for item in node:
            if isinstance(item, str) and re.match(rf"^{ENV_PREFIX}\w+=", item):
                found.add(item.split("=", 1)[0])
            else:
                found |= memstream_vars(item)
    return found


def interpolate(value: str) -> str:
    """Compose interpolation with every variable unset: ``${X:-d}`` → ``d``, ``$$`` → ``$``."""
    return _INTERPOLATION.sub(lambda m: m.group(2) or "", value).replace("$$", "$")


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as a mapping, interpolated with defaults."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): interpolate(str(v)) for k, v in env.items() if v is not None}


def command_argv(service: dict[str, Any]) -> list[str]:
    command = service.get("command")
    if command is None:
        return []
    return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]


def depends_on(service: dict[str, Any]) -> dict[str, dict[str, Any]]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {name: {"condition": "service_started"} for name in deps}
    return {name: (spec or {}) for name, spec in deps.items()}


def console_scripts() -> dict[str, str]:
    """Script name → pyproject that declares it, over every ``services/*/pyproject.toml``."""
    out: dict[str, str] = {}
    for path in sorted(ROOT.glob("services/*/pyproject.toml")):
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
        for name in doc.get("project", {}).get("scripts", {}):
            out[name] = str(path.relative_to(ROOT))
    return out


def dockerfile_env() -> dict[str, str]:
    """``ENV`` settings of the root Dockerfile (``K=V`` pairs, continuation lines joined)."""
    text = DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.strip().upper().startswith("ENV "):
            for token in shlex.split(line.strip()[4:]):
                key, _, value = token.partition("=")
                env[key] = value
    return env


def host_port(target: str) -> tuple[str, int]:
    host, _, port = target.rpartition(":")
    return host, int(port)


def scrape_targets(prom: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for job in prom.get("scrape_configs") or []:
        for static in job.get("static_configs") or []:
            for target in static.get("targets") or []:
                yield job["job_name"], target


def built_from_repo(service: dict[str, Any]) -> bool:
    return "build" in service


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    doc = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(doc, dict), "docker-compose.yml must be a mapping"
    return doc


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    svcs = compose.get("services")
    assert isinstance(svcs, dict) and svcs, "docker-compose.yml declares no services"
    return svcs


@pytest.fixture(scope="module")
def prometheus() -> dict[str, Any]:
    doc = yaml.safe_load(PROMETHEUS.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


# ---------------------------------------------------------------- the mapping itself


def test_env_to_field_mapping() -> None:
    assert env_to_field("MEMSTREAM_KAFKA_BOOTSTRAP") == "kafka_bootstrap"
    assert env_to_field("MEMSTREAM_TOPIC_REPLICATION") == "topic_replication"
    assert unknown_settings_vars({"MEMSTREAM_KAFKA_BOOTSTRAP", "MEMSTREAM_DATA_DIR"}) == []
    assert unknown_settings_vars({"MEMSTREAM_BOGUS_KNOB", "MEMSTREAM_API_PORT"}) == [
        "MEMSTREAM_BOGUS_KNOB"
    ]
    with pytest.raises(ValueError):
        env_to_field("KAFKA_BOOTSTRAP")


def test_bogus_variable_in_compose_is_caught(compose: dict[str, Any]) -> None:
    """A ``MEMSTREAM_`` variable that Settings would silently ignore must fail the check."""
    doc = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    doc["services"]["memstream-api"]["environment"]["MEMSTREAM_BOGUS_KNOB"] = "1"
    doc["services"]["neo4j"]["environment"] = ["MEMSTREAM_OTHER_BOGUS=2"]
    assert unknown_settings_vars(memstream_vars(doc)) == [
        "MEMSTREAM_BOGUS_KNOB",
        "MEMSTREAM_OTHER_BOGUS",
    ]


# ---------------------------------------------------------------- docker-compose.yml


def test_every_service_has_image_or_build(services: dict[str, dict[str, Any]]) -> None:
    missing = [name for name, svc in services.items() if "image" not in svc and "build" not in svc]
    assert not missing, f"services without image or build: {missing}"


def test_topology_has_the_expected_services(services: dict[str, dict[str, Any]]) -> None:
    images = {name: str(svc.get("image", "")) for name, svc in services.items()}
    assert any(i.startswith("apache/kafka") for i in images.values()), "Apache Kafka missing"
    assert any(re.fullmatch(r"neo4j:5(\..*)?", i) for i in images.values()), "Neo4j 5 missing"
    for image in ("qdrant/qdrant", "prom/prometheus", "grafana/grafana", "postgres:"):
        assert any(i.startswith(image) for i in images.values()), f"{image} missing"
    assert set(MEMSTREAM_SERVICES) <= set(services)
    kafka = [svc for svc in services.values() if str(svc.get("image", "")).startswith("apache/")]
    for svc in kafka:
        roles = environment(svc).get("KAFKA_PROCESS_ROLES", "")
        assert "controller" in roles, "Kafka must run in KRaft mode (a controller role)"


def test_built_services_use_the_root_dockerfile(services: dict[str, dict[str, Any]]) -> None:
    assert DOCKERFILE.is_file()
    built = {name: svc for name, svc in services.items() if built_from_repo(svc)}
    assert set(MEMSTREAM_SERVICES) <= set(built)
    for name, svc in built.items():
        build = svc["build"]
        spec = {"context": build} if isinstance(build, str) else dict(build)
        context = (COMPOSE.parent / spec.get("context", ".")).resolve()
        dockerfile = (context / spec.get("dockerfile", "Dockerfile")).resolve()
        assert context == ROOT, f"{name}: build context {context} is not the repo root"
        assert dockerfile == DOCKERFILE, f"{name}: builds from {dockerfile}, not the root one"


def test_heavy_background_services_get_fewer_cpu_shares(
    services: dict[str, dict[str, Any]],
) -> None:
    heavy = {"memstream-archiver", "memstream-retrospective", "memstream-latents"}
    assert heavy <= set(services)
    for name in heavy:
        assert int(services[name].get("cpu_shares", 1024)) < 1024, name
    fast = {n for n in services if n.startswith("memstream-")} - heavy
    assert {"memstream-sequencer", "memstream-graph-projector", "memstream-api"} <= fast
    for name in fast:  # the path a read after= waits on
        assert int(services[name].get("cpu_shares", 1024)) >= 1024, name


def test_dockerfile_shape() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert re.search(r"^FROM python:3\.11-slim\b", text, re.M)
    assert "pip install" in text and " uv" in text
    assert "uv sync --frozen --no-dev" in text
    env = dockerfile_env()
    assert "/app/.venv/bin" in env.get("PATH", "")
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users and users[-1] not in {"root", "0"}, "the image must run as a non-root user"
    assert unknown_settings_vars({k for k in env if k.startswith(ENV_PREFIX)}) == []


def test_memstream_env_vars_are_settings_fields(compose: dict[str, Any]) -> None:
    names = memstream_vars(compose)
    assert names, "no MEMSTREAM_* variables found; the check would prove nothing"
    bogus = unknown_settings_vars(names)
    assert not bogus, f"not fields of memstream.settings.Settings: {bogus}"


def test_memstream_env_builds_valid_settings(services: dict[str, dict[str, Any]]) -> None:
    for name in MEMSTREAM_SERVICES:
        env = environment(services[name])
        fields: dict[str, Any] = {
            env_to_field(k): v for k, v in env.items() if k.startswith(ENV_PREFIX)
        }
        settings = Settings(**fields)
        assert settings.kafka_bootstrap, f"{name}: no external Kafka configured"
        assert settings.topic_replication <= sum(
            1 for svc in services.values() if str(svc.get("image", "")).startswith("apache/kafka")
        ), f"{name}: replication factor exceeds the number of brokers"


def test_memstream_commands_are_console_scripts(services: dict[str, dict[str, Any]]) -> None:
    scripts = console_scripts()
    assert scripts, "no [project.scripts] found under services/*/pyproject.toml"
    for name, svc in services.items():
        if not built_from_repo(svc):
            continue
        argv = command_argv(svc)
        assert argv, f"{name}: a memstream service must say which process it runs"
        assert argv[0] in scripts, f"{name}: {argv[0]!r} is not a declared console script"
    for name, script in MEMSTREAM_SERVICES.items():
        assert command_argv(services[name])[0] == script


def test_depends_on_refers_to_existing_services(services: dict[str, dict[str, Any]]) -> None:
    for name, svc in services.items():
        for dep, spec in depends_on(svc).items():
            assert dep in services, f"{name} depends on unknown service {dep!r}"
            assert dep != name
            condition = spec.get("condition", "service_started")
            assert condition in DEPENDS_CONDITIONS, f"{name} -> {dep}: bad condition {condition}"
            if condition == "service_healthy":
                assert "healthcheck" in services[dep], f"{name} waits for {dep}'s healthcheck"


def test_services_have_healthchecks(services: dict[str, dict[str, Any]]) -> None:
    missing = [name for name, svc in services.items() if "healthcheck" not in svc]
    assert not missing, f"services without a healthcheck: {missing}"
    for name in MEMSTREAM_SERVICES:
        env = environment(services[name])
        ports = {env.get(f"{ENV_PREFIX}METRICS_PORT"), env.get(f"{ENV_PREFIX}API_PORT")}
        test = " ".join(services[name]["healthcheck"]["test"])
        checked = {m for m in re.findall(r"127\.0\.0\.1:(\d+)", test)}
        assert checked and checked <= ports, f"{name}: healthcheck probes {checked}, not {ports}"


def test_volumes_and_mounts_resolve(compose: dict[str, Any]) -> None:
    declared = set(compose.get("volumes") or {})
    for name, svc in compose["services"].items():
        for mount in svc.get("volumes") or []:
            source = mount.split(":", 1)[0] if isinstance(mount, str) else mount.get("source")
            if source.startswith((".", "/")):
                assert (COMPOSE.parent / source).exists(), f"{name}: bind source {source} missing"
            else:
                assert source in declared, f"{name}: volume {source!r} not declared"
    for store in ("kafka", "neo4j", "qdrant", "archive"):
        assert any(v.startswith(store) for v in declared), f"no {store} volume"


# ---------------------------------------------------------------- Prometheus and Grafana


def test_prometheus_targets_name_compose_services(
    prometheus: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    targets = list(scrape_targets(prometheus))
    assert targets
    for job, target in targets:
        host, port = host_port(target)
        assert host == "localhost" or host in services, f"{job}: {host} is not a compose service"
        if host in MEMSTREAM_SERVICES:
            env = environment(services[host])
            ports = {env.get(f"{ENV_PREFIX}METRICS_PORT"), env.get(f"{ENV_PREFIX}API_PORT")}
            assert str(port) in ports, f"{job}: {target} is not a port {host} listens on"
    scraped = {host_port(t)[0] for _, t in targets}
    assert set(MEMSTREAM_SERVICES) <= scraped, "every memstream service must be scraped"


def test_prometheus_rule_files_stay_in_its_directory(prometheus: dict[str, Any]) -> None:
    for pattern in prometheus.get("rule_files") or []:
        assert not pattern.startswith("/") and ".." not in pattern
    mounts = [m for m in yaml.safe_load(COMPOSE.read_text())["services"]["prometheus"]["volumes"]]
    assert any(m.startswith("./deploy/prometheus:/etc/prometheus") for m in mounts)


def test_promtool_accepts_prometheus_config() -> None:
    """Full syntax check, including any rule files the globs pick up."""
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool missing: `make test` installs Debian's prometheus"
    result = subprocess.run(
        [promtool, "check", "config", str(PROMETHEUS)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_grafana_provisioning(services: dict[str, dict[str, Any]]) -> None:
    ds = yaml.safe_load((GRAFANA / "provisioning/datasources/prometheus.yml").read_text())
    (source,) = [d for d in ds["datasources"] if d["type"] == "prometheus"]
    host, _ = host_port(source["url"].split("://", 1)[1])
    assert host in services
    boards = yaml.safe_load((GRAFANA / "provisioning/dashboards/dashboards.yml").read_text())
    paths = {p["options"]["path"] for p in boards["providers"]}
    assert paths == {"/var/lib/grafana/dashboards"}
    mounts = services["grafana"]["volumes"]
    assert "./deploy/grafana/dashboards:/var/lib/grafana/dashboards:ro" in mounts
    assert "./deploy/grafana/provisioning:/etc/grafana/provisioning:ro" in mounts
    assert (GRAFANA / "dashboards").is_dir()


def test_prometheus_sets_no_component_target_label(prometheus: dict[str, Any]) -> None:
    """Series carry their own ``component``; a target label would rename it exported_component."""
    for job in prometheus.get("scrape_configs") or []:
        for static in job.get("static_configs") or []:
            assert "component" not in (static.get("labels") or {}), job["job_name"]
        for relabel in job.get("relabel_configs") or []:
            assert relabel.get("target_label") != "component", job["job_name"]


def test_grafana_provisions_the_generated_dashboards(services: dict[str, dict[str, Any]]) -> None:
    from memstream_dashboards import dashboards
    from memstream_dashboards.grafana import DATASOURCE

    boards = yaml.safe_load((GRAFANA / "provisioning/dashboards/dashboards.yml").read_text())
    (provider_path,) = {p["options"]["path"] for p in boards["providers"]}
    mounts = [str(m).split(":") for m in services["grafana"]["volumes"]]
    (host_dir,) = [(COMPOSE.parent / m[0]).resolve() for m in mounts if m[1] == provider_path]
    for dash in dashboards():
        assert (host_dir / dash.filename).is_file(), f"{dash.filename} is not provisioned"
    ds = yaml.safe_load((GRAFANA / "provisioning/datasources/prometheus.yml").read_text())
    assert DATASOURCE["uid"] in {d["uid"] for d in ds["datasources"]}
