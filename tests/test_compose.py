"""compose/: the production compose file and image, read rather than run (no Docker engine
runs here). The file is valid Compose; every statefed service runs a real subcommand with
settings its part reads and accepts; every long-running service has a health check; the
containers are not root; the state lives on volumes, shared where Spark needs it; Kafka
replicates; every published port is on this host's loopback only; the image bakes in the
Kafka connector of the pinned Spark; the brokers run the Kafka the tests run; Prometheus
scrapes every part where it serves /metrics, and the Grafana dashboard asks it only for
metrics the parts export, in valid PromQL; Grafana lets no one sign in."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from gateway.config import GatewayConfig
from node.config import NodeConfig
from pipeline import PipelineConfig
from pipeline.session import session_settings
from runtime.config import EnvConfig
from tooling.cli import _parser
from tooling.config import ToolingConfig

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "compose" / "docker-compose.yml"
DOCKERFILE = ROOT / "compose" / "Dockerfile"
PROMETHEUS_CONFIG = ROOT / "compose" / "prometheus" / "prometheus.yml"
GRAFANA = ROOT / "compose" / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "statefed.json"
PROMTOOL = "/usr/bin/promtool"  # Debian's prometheus package (`make prometheus`)
IMAGE = "statefed:latest"
# what each `statefed` subcommand reads its settings with (every one reads the catalogue)
CONFIGS: dict[str, type[EnvConfig]] = {
    "topics": ToolingConfig,
    "pipeline": PipelineConfig,
    "node": NodeConfig,
    "gateway": GatewayConfig,
}


def _compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return document


def _services() -> dict[str, dict[str, Any]]:
    services: dict[str, dict[str, Any]] = _compose()["services"]
    return services


def _statefed_services() -> dict[str, dict[str, Any]]:
    """The services that run `statefed <command>` (the image's entrypoint)."""
    return {
        name: s
        for name, s in _services().items()
        if s.get("image") == IMAGE and "entrypoint" not in s
    }


def _one_shot() -> set[str]:
    """Services others wait on to complete: jobs that run once and exit."""
    return {
        dependency
        for service in _services().values()
        for dependency, condition in _dependencies(service).items()
        if condition == "service_completed_successfully"
    }


def _dependencies(service: dict[str, Any]) -> dict[str, str]:
    depends = service.get("depends_on", {})
    if isinstance(depends, list):
        return dict.fromkeys(depends, "service_started")
    return {name: spec.get("condition", "service_started") for name, spec in depends.items()}


def _environment(service: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in service.get("environment", {}).items()}


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """Mount target -> named volume (short syntax `volume:/path`)."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        assert source in _compose()["volumes"], f"{source} is not a named volume"
        mounts[target] = source
    return mounts


def _dockerfile() -> str:
    return DOCKERFILE.read_text()


def _pinned_pyspark() -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (pin,) = [d for d in project["project"]["dependencies"] if d.startswith("pyspark==")]
    return pin.removeprefix("pyspark==")


def _validate(path: Path) -> subprocess.CompletedProcess[str]:
    """check-jsonschema (pinned in the dev extra) with the Compose Specification's schema
    that its release carries."""
    schema = ["--builtin-schema", "vendor.compose-spec"]
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", *schema, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_image_copies_every_package_the_install_includes() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    included = project["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {pattern.rstrip("*") for pattern in included}
    copied = set(re.findall(r"^COPY (\w+) \./\1$", _dockerfile(), re.MULTILINE))
    assert packages <= copied, f"compose/Dockerfile does not COPY {sorted(packages - copied)}"


def test_the_file_is_valid_compose(tmp_path: Path) -> None:
    result = _validate(COMPOSE)
    assert result.returncode == 0, result.stdout + result.stderr
    # the same check refuses a misspelt key: it does validate
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(COMPOSE.read_text().replace("start_period:", "start_periode:", 1))
    result = _validate(broken)
    assert result.returncode == 1
    assert "start_periode" in result.stdout


def test_every_command_is_a_statefed_subcommand() -> None:
    commands = {name: s["command"] for name, s in _statefed_services().items()}
    assert {tuple(c) for c in commands.values()} == {(c,) for c in CONFIGS}
    for name, command in commands.items():
        assert _parser().parse_args(command).command == command[0], name
    for name, service in _services().items():
        test = service.get("healthcheck", {}).get("test", [])
        if test[1:2] == ["statefed"]:
            _parser().parse_args(test[2:])  # exits on an unknown subcommand or flag
        if "entrypoint" in service:  # Spark's own processes, from the same image
            assert service["entrypoint"][0] == "spark-class", name
            assert "command" not in service, name


def test_every_statefed_variable_is_one_its_part_reads_and_accepts() -> None:
    for name, service in _services().items():
        env = _environment(service)
        set_here = {v for v in env if v.startswith("STATEFED_")}
        if name not in _statefed_services():
            assert not set_here, f"{name} runs no statefed part but sets {sorted(set_here)}"
            continue
        config = CONFIGS[service["command"][0]]
        read = set(config.ENV.values()) | {"STATEFED_CATALOGUE"}
        unread = {v for v in set_here - read if not v.startswith("STATEFED_KAFKA_")}
        assert not unread, f"{name}: {config.__name__} does not read {sorted(unread)}"
        config.from_env(env)  # every value is one the part accepts


def test_every_long_running_service_has_a_health_check_and_is_waited_for_healthy() -> None:
    one_shot = _one_shot()
    assert one_shot == {"topics"}
    for name, service in _services().items():
        if name in one_shot:
            assert service.get("restart", "no") == "no", name
            continue
        check = service.get("healthcheck")
        assert check and check["test"][0] == "CMD" and not check.get("disable"), name
        assert service.get("restart") == "unless-stopped", name
        for dependency, condition in _dependencies(service).items():
            if dependency not in one_shot:
                assert condition == "service_healthy", f"{name} -> {dependency}"


def test_the_health_checks_ask_what_each_part_serves() -> None:
    for name, service in _statefed_services().items():
        command, env = service["command"][0], _environment(service)
        test = service["healthcheck"]["test"] if name not in _one_shot() else []
        if command == "node":
            url = f"http://127.0.0.1:{NodeConfig.from_env(env).port}/health"
            assert f"urlopen('{url}'" in test[-1], name
        elif command == "gateway":
            url = f"http://127.0.0.1:{GatewayConfig.from_env(env).port}/health"
            assert f"urlopen('{url}'" in test[-1], name
        elif command == "pipeline":
            assert test == ["CMD", "statefed", "pipeline", "--check-health"]
            assert PipelineConfig.from_env(env).health_file is not None
    for name, port in (("spark-master", 8080), ("spark-worker", 8081)):  # their web UIs
        test = _services()[name]["healthcheck"]["test"]
        assert f"urlopen('http://127.0.0.1:{port}/json/'" in test[-1]


def test_the_containers_do_not_run_as_root() -> None:
    users = re.findall(r"^USER (\S+)$", _dockerfile(), re.MULTILINE)
    assert users and users[-1] not in ("root", "0")
    uid = re.search(r"^ARG STATEFED_UID=(\d+)$", _dockerfile(), re.MULTILINE)
    assert uid and int(uid.group(1)) >= 1000
    assert f'useradd --system --uid "$STATEFED_UID" --gid {users[-1]}' in _dockerfile()
    for name, service in _services().items():
        assert str(service.get("user", "")).split(":")[0] not in ("root", "0"), name


def test_state_is_on_volumes_owned_by_the_containers_user() -> None:
    services = _services()
    checkpoint = str(PipelineConfig.from_env(_environment(services["pipeline"])).checkpoint_dir)
    # executors write the state stores: the worker mounts the driver's checkpoints there too
    assert _mounts(services["pipeline"])[checkpoint] == "checkpoints"
    assert _mounts(services["spark-worker"])[checkpoint] == "checkpoints"
    node_volumes = []
    for service in _statefed_services().values():
        if service["command"] == ["node"]:
            state = str(NodeConfig.from_env(_environment(service)).state_dir)
            node_volumes.append(_mounts(service)[state])
            assert state in _dockerfile()  # made in the image, owned by its user
    assert len(node_volumes) == len(set(node_volumes)) == 3
    assert checkpoint in _dockerfile()
    assert re.search(r"install -d -o statefed -g statefed", _dockerfile())


def _brokers() -> dict[str, dict[str, str]]:
    return {
        name: _environment(s)
        for name, s in _services().items()
        if str(s.get("image", "")).startswith("apache/kafka:")
    }


def _makefile_kafka_version() -> str:
    pin = re.search(r"^KAFKA_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert pin, "the Makefile pins no KAFKA_VERSION"
    return pin.group(1)


def test_the_brokers_run_the_kafka_version_the_makefile_pins_for_every_test() -> None:
    images = {str(_services()[name]["image"]) for name in _brokers()}
    assert images == {f"apache/kafka:{_makefile_kafka_version()}"}


def test_kafka_keeps_its_log_on_a_volume_per_broker() -> None:
    volumes = []
    for name, env in _brokers().items():
        mounts = _mounts(_services()[name])
        assert env["KAFKA_LOG_DIRS"] in mounts, f"{name}'s log is not on a volume"
        volumes.append(mounts[env["KAFKA_LOG_DIRS"]])
    assert len(volumes) == len(set(volumes)) == 3


def test_kafka_is_a_quorum_of_three_that_replicates_every_topic() -> None:
    brokers = _brokers()
    count = len(brokers)
    assert count == 3
    (cluster_id,) = {env["CLUSTER_ID"] for env in brokers.values()}
    assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16  # a Kafka Uuid
    voters = {f"{env['KAFKA_NODE_ID']}@{name}:9093" for name, env in brokers.items()}
    advertised = {
        env["KAFKA_ADVERTISED_LISTENERS"].removeprefix("PLAINTEXT://") for env in brokers.values()
    }
    for env in brokers.values():
        assert set(env["KAFKA_CONTROLLER_QUORUM_VOTERS"].split(",")) == voters
        for variable in (
            "KAFKA_DEFAULT_REPLICATION_FACTOR",
            "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR",
            "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
        ):
            assert int(env[variable]) == count, variable
        assert int(env["KAFKA_MIN_INSYNC_REPLICAS"]) == count - 1
        assert int(env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"]) == count - 1
    topics = ToolingConfig.from_env(_environment(_services()["topics"]))
    assert topics.topics_replication == count
    assert topics.topics_min_isr == count - 1
    for name, service in _statefed_services().items():
        bootstrap = _environment(service)["STATEFED_BOOTSTRAP"]
        assert set(bootstrap.split(",")) == advertised, name


def test_spark_processes_advertise_their_service_names() -> None:
    services = _services()
    pipeline = services["pipeline"]
    config = PipelineConfig.from_env(_environment(pipeline))
    # executors on the worker connect back to the driver by this name; the driver binds to
    # it too, which the container's hostname makes its own address
    assert pipeline["hostname"] == config.driver_host == "pipeline"
    assert session_settings(config, {})["spark.driver.host"] == "pipeline"
    master = urlsplit(config.spark_master)
    assert master.scheme == "spark" and master.hostname == "spark-master"
    for name in ("spark-master", "spark-worker"):
        entrypoint = services[name]["entrypoint"]
        assert entrypoint[entrypoint.index("--host") + 1] == services[name]["hostname"] == name
    assert services["spark-worker"]["entrypoint"][-1] == config.spark_master


def test_every_published_port_is_on_this_hosts_loopback_only() -> None:
    """The anonymous gateway and the web UIs ask no one who they are: none is reachable from
    another machine until someone publishes it there on purpose (docs/operations.md, Ports)."""
    published = {
        name: service["ports"] for name, service in _services().items() if "ports" in service
    }
    for name, ports in published.items():
        for port in ports:
            assert _bound_address(port) == "127.0.0.1", f"{name} publishes {port} beyond loopback"
    assert published == {
        "gateway": ["127.0.0.1:8100:8100"],
        "spark-master": ["127.0.0.1:8080:8080"],
        "prometheus": ["127.0.0.1:9090:9090"],
        "grafana": ["127.0.0.1:3000:3000"],
    }


def test_grafana_lets_anonymous_viewers_in_and_no_one_sign_in() -> None:
    """docs/operations.md says Grafana has no login: anonymous viewers only. With the login
    form or basic auth on, its built-in admin's default password (admin/admin) would open it
    to anyone on this host, as an admin."""
    grafana = _environment(_services()["grafana"])
    assert grafana["GF_AUTH_ANONYMOUS_ENABLED"] == "true"
    assert grafana["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    assert grafana["GF_AUTH_DISABLE_LOGIN_FORM"] == "true"
    assert grafana["GF_AUTH_BASIC_ENABLED"] == "false"
    assert not {v for v in grafana if v.startswith("GF_SECURITY_ADMIN_")}
    operations = (ROOT / "docs" / "operations.md").read_text()
    assert "anonymous viewers only" in operations


def _bound_address(port: str | int | dict[str, Any]) -> str | None:
    """The host address a `ports:` entry binds; None for every interface (short syntax
    `[address:]host:container[/protocol]` or a bare container port, long syntax `host_ip`)."""
    if isinstance(port, dict):
        return port.get("host_ip")
    parts = str(port).rsplit(":", 2)
    return parts[0] if len(parts) == 3 else None


def test_the_image_bakes_in_the_kafka_connector_of_the_pinned_spark() -> None:
    version = re.search(r"^ARG SPARK_VERSION=(\S+)$", _dockerfile(), re.MULTILINE)
    assert version and version.group(1) == _pinned_pyspark()
    assert 'RUN python -m tooling.connector --spark-version "$SPARK_VERSION"' in _dockerfile()
    # after `pip install .` (the build step imports the installed pyspark)
    assert _dockerfile().index("pip install") < _dockerfile().index("tooling.connector")


def test_the_build_context_holds_only_what_the_image_installs() -> None:
    lines = [
        line
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert lines[0] == "*"  # everything else stays out: .git, .venv, tests, secrets...
    allowed = {line.removeprefix("!") for line in lines if line.startswith("!")}
    copied = set()
    for sources in re.findall(r"^COPY (.+) \S+$", _dockerfile(), re.MULTILINE):
        copied |= set(sources.split())
    assert allowed == copied
    assert not any(a.startswith((".", "compose", "tests")) for a in allowed)


def test_prometheus_scrapes_every_part_where_it_serves_metrics(tmp_path: Path) -> None:
    services = _services()
    expected = set()
    for name, service in _statefed_services().items():
        command, env = service["command"][0], _environment(service)
        if command == "node":
            expected.add(f"{name}:{NodeConfig.from_env(env).port}")
        elif command == "gateway":
            expected.add(f"{name}:{GatewayConfig.from_env(env).port}")
        elif command == "pipeline":
            config = PipelineConfig.from_env(env)
            assert config.metrics_port and config.metrics_host == "0.0.0.0"
            expected.add(f"{name}:{config.metrics_port}")
    scraped = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    targets = {
        target
        for job in scraped["scrape_configs"]
        for static in job["static_configs"]
        for target in static["targets"]
    }
    assert targets == expected
    prometheus = services["prometheus"]
    assert "./prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in prometheus["volumes"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    checked = subprocess.run(
        [PROMTOOL, "check", "config", str(PROMETHEUS_CONFIG)], capture_output=True, timeout=60
    )
    assert checked.returncode == 0, (checked.stdout + checked.stderr).decode()


def test_every_part_answers_the_host_prometheus_and_the_gateway_call_it_by() -> None:
    """The anonymous gateway checks `Host` against DNS rebinding (runtime.hosts): its scrape
    target's name is listed, so no scrape gets 421; the nodes run with the cluster secret, so
    they check nothing, and would answer their own URLs' hosts anyway."""
    scraped = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    targets = [
        target
        for job in scraped["scrape_configs"]
        for static in job["static_configs"]
        for target in static["targets"]
    ]
    policies = {}
    for name, service in _statefed_services().items():
        command, env = service["command"][0], _environment(service)
        if command == "gateway":
            policies[name] = GatewayConfig.from_env(env).host_policy()
            assert policies[name].enforced, "the anonymous gateway checks Host"
            assert policies[name].allows(b"localhost:8100"), "GraphiQL, from this host"
        elif command == "node":
            node = NodeConfig.from_env(env)
            policies[name] = node.host_policy()
            assert not policies[name].enforced, "nodes with the secret check no Host"
            assert policies[name].allows(urlsplit(node.url).netloc.encode())
    assert {t.split(":")[0] for t in targets} >= set(policies)
    for target in targets:
        policy = policies.get(target.split(":")[0])
        assert policy is None or policy.allows(target.encode()), target


def test_the_grafana_dashboard_asks_prometheus_for_metrics_the_parts_export(
    tmp_path: Path,
) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    expressions = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert expressions
    used = {name for e in expressions for name in re.findall(r"statefed_\w+", e)}
    unknown = used - _exported_metric_names()
    assert not unknown, f"the dashboard asks for metrics no part exports: {sorted(unknown)}"
    # each expression is valid PromQL: promtool checks them as recording rules
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"statefed:dashboard_{i}", "expr": e} for i, e in enumerate(expressions)
    ]}]}  # fmt: skip
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    checked = subprocess.run(
        [PROMTOOL, "check", "rules", str(tmp_path / "rules.yml")], capture_output=True, timeout=60
    )
    assert checked.returncode == 0, (checked.stdout + checked.stderr).decode()
    sources = yaml.safe_load(
        (GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text()
    )
    (source,) = sources["datasources"]
    assert source["url"] == "http://prometheus:9090"
    uids = {t["datasource"]["uid"] for p in dashboard["panels"] for t in p["targets"]}
    assert uids == {source["uid"]}
    grafana = _services()["grafana"]
    assert "./grafana/dashboards:/var/lib/grafana/dashboards:ro" in grafana["volumes"]
    assert _dependencies(grafana) == {"prometheus": "service_healthy"}


def test_the_dashboards_input_rate_falls_to_0_when_the_pipeline_goes_idle(
    tmp_path: Path,
) -> None:
    """promtool evaluates the panel's expression over a view that read 40 records a second
    for two minutes, then nothing."""
    (panel,) = [
        p for p in json.loads(DASHBOARD.read_text())["panels"] if "input rows" in p["title"]
    ]
    (expression,) = [t["expr"] for t in panel["targets"]]
    (tmp_path / "empty.yml").write_text("groups: []\n")
    series = 'statefed_pipeline_input_rows_total{view="v", instance="pipeline:9400"}'

    def sample(at: str, value: float) -> dict[str, Any]:
        return {
            "expr": expression,
            "eval_time": at,
            "exp_samples": [{"labels": '{view="v"}', "value": value}],
        }

    steps = {"interval": "15s", "input_series": [{"series": series, "values": "0+600x8 4800x20"}]}
    tests = {
        "rule_files": ["empty.yml"],
        "evaluation_interval": "15s",
        "tests": [{**steps, "promql_expr_test": [sample("1m", 40), sample("5m", 0)]}],
    }
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests))
    checked = subprocess.run(
        [PROMTOOL, "test", "rules", str(tmp_path / "tests.yml")], capture_output=True, timeout=60
    )
    assert checked.returncode == 0, (checked.stdout + checked.stderr).decode()


def _exported_metric_names() -> set[str]:
    """Every sample name the gateway, a node and the pipeline driver can export."""
    from gateway.metrics import GatewayMetrics, runtime_figures
    from node.changelog.partitions import PartitionRegistry
    from node.serve.metrics import NodeMetrics
    from pipeline.metrics import PipelineMetrics
    from schema import CATALOGUE

    families = [
        *GatewayMetrics().registry.collect(),
        *runtime_figures(
            {
                k: 0
                for k in (
                    *("hits", "misses", "top_hits", "refused", "skipped", "entries", "bytes"),
                    *("filled_from_reads", "filled_by_snapshots", "whole_views"),
                )
            },
            0,
            0,
        ),
        *NodeMetrics(PartitionRegistry("n"), CATALOGUE).registry.collect(),
        *PipelineMetrics().registry.collect(),
    ]
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum")}
    return {
        family.name + suffix for family in families for suffix in suffixes.get(family.type, ("",))
    }
