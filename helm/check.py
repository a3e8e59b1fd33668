#!/usr/bin/env python3
"""Render, lint and validate the mcp-harbor Helm chart offline, with no helm binary or cluster.

  helm/install-check-deps.sh                              # once: venv with the two packages below
  ~/.cache/mcp-harbor/helmenv/bin/python helm/check.py    # [--binary target/release/mcp-harbor]

For each scenario (default values; ingress with TLS, allowedHosts and extraEnv) it
  1. validates the values against values.schema.json and lints the chart (helm-python-sdk, which
     bundles Helm's own Go SDK),
  2. renders the chart and validates every manifest against the Kubernetes OpenAPI schemas of the
     oldest and newest Kubernetes versions checked (kubernetes-validate, strict: unknown fields fail),
  3. checks what the chart promises: config mounted where MCP_HARBOR_CONFIG points, host 0.0.0.0,
     probes on /healthz and /readyz, non-root read-only pod, config checksum, allowed hosts, ingress,
  4. when a built server binary is found, boots it with the rendered config and environment and
     checks /healthz, /readyz and that every allowed Host (and no other) may initialize a session.
It also checks that values.schema.json rejects bad values. Exit status 1 on any failure.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

try:
    import helm_python as helm
    import kubernetes_validate
    import yaml
except ImportError as e:
    sys.exit(f"helm/check.py: {e}; run helm/install-check-deps.sh and use "
             "~/.cache/mcp-harbor/helmenv/bin/python")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CHART = HERE / "mcp-harbor"
RELEASE, NAMESPACE = "harbor", "mcp"
CONFIG_SECTIONS = {"server", "sessions", "log", "tenants"}  # src/config.rs, deny_unknown_fields

SCENARIOS: dict[str, dict] = {
    "defaults": {},
    "ingress": {
        "ingress": {
            "enabled": True,
            "className": "nginx",
            "host": "mcp.example.com",
            "annotations": {
                "nginx.ingress.kubernetes.io/upstream-hash-by": "$http_mcp_session_id",
                "nginx.ingress.kubernetes.io/proxy-buffering": "off",
            },
            "tls": {"enabled": True},
        },
        "allowedHosts": ["mcp.internal.example.com"],
        "extraEnv": [{"name": "MCP_HARBOR__SESSIONS__IDLE_TIMEOUT_SECS", "value": "600"}],
        "podAnnotations": {"example.com/team": "mcp"},
    },
}

# Values the schema must refuse.
BAD_VALUES: dict[str, dict] = {
    "replicaCount is a string": {"replicaCount": "two"},
    "service.port out of range": {"service": {"port": 70000}},
    "unknown top-level key": {"replicas": 2},
    "unknown image.pullPolicy": {"image": {"pullPolicy": "Sometimes"}},
    "ingress enabled without a host": {"ingress": {"enabled": True, "host": ""}},
    "allowedHosts entry with a port": {"allowedHosts": ["mcp.example.com:443"]},
    "config is not a string": {"config": 8080},
}


class Report:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        if ok:
            self.passed += 1
            print(f"  ok    {name}")
        else:
            self.failed += 1
            print(f"  FAIL  {name}{': ' + detail if detail else ''}")
        return ok

    def run(self, name: str, fn) -> object:
        """Run fn(); an exception is a failure of this check."""
        try:
            result = fn()
        except Exception as e:  # noqa: BLE001 - report any failure as a finding
            self.check(name, False, f"{type(e).__name__}: {e}".strip())
            return None
        self.check(name, True)
        return result


def by_kind(docs: list[dict]) -> dict[str, dict]:
    return {d["kind"]: d for d in docs}


def env_of(container: dict) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def check_lint(r: Report, chart_dir: Path, values: dict, kube_version: str) -> None:
    report = helm.lint(chart_dir, values, strict=True, namespace=NAMESPACE,
                       kube_version=f"v{kube_version}")
    findings = [m for m in report["messages"] if m["severity"] >= 2]
    detail = "; ".join(f"{m['path']}: {m['error']}" for m in findings) + "; ".join(report["errors"])
    r.check(f"helm lint --strict (kube {kube_version})",
            not findings and not report["errors"], detail)


def check_manifests(r: Report, docs: list[dict], kube_versions: list[str]) -> None:
    for doc in docs:
        for v in kube_versions:
            name = f"{doc['kind']}/{doc['metadata']['name']} valid for Kubernetes {v} (strict)"
            try:
                kubernetes_validate.validate(doc, v, strict=True)
                r.check(name, True)
            except kubernetes_validate.ValidationError as e:
                path = ".".join(str(p) for p in e.path)
                r.check(name, False, f"{path}: {e.message}")
            except (kubernetes_validate.SchemaNotFoundError,
                    kubernetes_validate.utils.InvalidSchemaError) as e:
                r.check(name, False, e.message)


def check_chart_promises(r: Report, values: dict, chart, rendered: dict,
                         docs: list[dict]) -> dict:
    """The chart-specific assertions; returns what the boot check needs."""
    merged = chart.merge_values(values)
    kinds = by_kind(docs)
    want = {"ConfigMap", "Deployment", "Service"} | ({"Ingress"} if merged["ingress"]["enabled"] else set())
    r.check(f"renders exactly {sorted(want)}", set(kinds) == want and len(docs) == len(want),
            f"got {[d['kind'] for d in docs]}")
    cm, dep, svc = kinds.get("ConfigMap"), kinds.get("Deployment"), kinds.get("Service")
    if not (cm and dep and svc):
        return {}
    pod = dep["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    env = env_of(container)

    # Configuration file: valid TOML of known sections, mounted where MCP_HARBOR_CONFIG points.
    config_text = cm["data"].get("config.toml", "")
    config = r.run("config.toml is TOML", lambda: tomllib.loads(config_text))
    if config is not None:
        r.check("config.toml has only known sections", set(config) <= CONFIG_SECTIONS,
                f"unknown: {sorted(set(config) - CONFIG_SECTIONS)}")
    mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
    cm_volumes = [v["name"] for v in pod["spec"].get("volumes", [])
                  if v.get("configMap", {}).get("name") == cm["metadata"]["name"]]
    config_path = env.get("MCP_HARBOR_CONFIG", "")
    r.check("MCP_HARBOR_CONFIG names the mounted config.toml",
            any(config_path == f"{mounts.get(v)}/config.toml" for v in cm_volumes),
            f"MCP_HARBOR_CONFIG={config_path!r}, mounts {mounts}, configmap volumes {cm_volumes}")
    want_sum = hashlib.sha256(rendered[f"{chart.name}/templates/configmap.yaml"].encode()).hexdigest()
    r.check("checksum/config annotation is the ConfigMap's sha256",
            pod["metadata"].get("annotations", {}).get("checksum/config") == want_sum)

    # Listening, probes, ports.
    r.check("MCP_HARBOR__SERVER__HOST=0.0.0.0", env.get("MCP_HARBOR__SERVER__HOST") == "0.0.0.0")
    ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    r.check("container port matches MCP_HARBOR__SERVER__PORT",
            str(ports.get("http")) == env.get("MCP_HARBOR__SERVER__PORT"), f"{ports} vs {env}")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container.get(probe, {}).get("httpGet", {})
        r.check(f"{probe} GET {path} on a named container port",
                get.get("path") == path and get.get("port") in ports, str(get))

    # Non-root, read-only root filesystem.
    psc, csc = pod["spec"].get("securityContext", {}), container.get("securityContext", {})
    r.check("pod runs as non-root", psc.get("runAsNonRoot") is True and psc.get("runAsUser", 0) > 0)
    r.check("read-only root filesystem, no privilege escalation, no capabilities",
            csc.get("readOnlyRootFilesystem") is True and csc.get("allowPrivilegeEscalation") is False
            and csc.get("capabilities", {}).get("drop") == ["ALL"])

    # Service reaches the pods.
    labels = pod["metadata"]["labels"]
    r.check("Service selector matches the pod labels and Deployment selector",
            svc["spec"]["selector"].items() <= labels.items()
            and svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"])
    r.check("Service targets the named container port",
            all(p["targetPort"] in ports for p in svc["spec"]["ports"]))

    # Allowed hosts: user's, the Service's DNS names, the ingress host.
    hosts = r.run("MCP_HARBOR__SERVER__ALLOWED_HOSTS is a JSON list of strings",
                  lambda: _str_list(json.loads(env.get("MCP_HARBOR__SERVER__ALLOWED_HOSTS", ""))))
    hosts = hosts or []
    svc_name = svc["metadata"]["name"]
    want_hosts = set(merged["allowedHosts"]) | {svc_name, f"{svc_name}.{NAMESPACE}.svc"}
    ingress = kinds.get("Ingress")
    if ingress:
        want_hosts.add(merged["ingress"]["host"])
    r.check("allowed hosts include allowedHosts, the Service names and the ingress host",
            want_hosts <= set(hosts), f"missing {sorted(want_hosts - set(hosts))}")

    for extra in merged["extraEnv"]:
        r.check(f"extraEnv {extra['name']} reaches the container",
                env.get(extra["name"]) == extra.get("value", ""))

    if ingress:
        rule = ingress["spec"]["rules"][0]
        backend = rule["http"]["paths"][0]["backend"]["service"]
        svc_ports = {p["name"] for p in svc["spec"]["ports"]}
        r.check("Ingress routes its host to the Service's http port",
                rule["host"] == merged["ingress"]["host"] and backend["name"] == svc_name
                and backend["port"].get("name") in svc_ports, json.dumps(rule))
        tls = ingress["spec"].get("tls", [])
        r.check("Ingress TLS covers the host when enabled",
                bool(tls) == merged["ingress"]["tls"]["enabled"]
                and all(rule["host"] in t["hosts"] and t.get("secretName") for t in tls))
        r.check("Ingress keeps the annotations",
                ingress["metadata"].get("annotations", {}) == merged["ingress"]["annotations"])
    return {"config_text": config_text, "config": config or {}, "env": env, "hosts": hosts}


def _str_list(value: object) -> list[str]:
    if not (isinstance(value, list) and all(isinstance(h, str) for h in value)):
        raise ValueError(f"not a list of strings: {value!r}")
    return value


def find_binary(arg: str | None) -> Path | None:
    candidates = [arg] if arg else [os.environ.get("MCP_HARBOR_BIN"),
                                    ROOT / "target/release/mcp-harbor",
                                    ROOT / "target/debug/mcp-harbor"]
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return Path(c)
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_status(port: int, method: str, path: str, host: str, body: dict | None = None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    headers = {"Host": host}
    if body is not None:
        headers |= {"Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream"}
    try:
        conn.request(method, path, json.dumps(body) if body is not None else None, headers)
        return conn.getresponse().status
    finally:
        conn.close()


def check_boot(r: Report, binary: Path, facts: dict) -> None:
    """Run the real server with the rendered config file and container environment."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        config_file = Path(tmp) / "config.toml"
        config_file.write_text(facts["config_text"])
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_HARBOR")}
        env |= facts["env"]
        env |= {"MCP_HARBOR_CONFIG": str(config_file), "MCP_HARBOR__SERVER__HOST": "127.0.0.1",
                "MCP_HARBOR__SERVER__PORT": str(port), "MCP_HARBOR__LOG__FILTER": "warn"}
        env.pop("RUST_LOG", None)
        log = Path(tmp) / "server.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([str(binary), "serve"], env=env, stdout=out, stderr=out)
        try:
            up = False
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    up = http_status(port, "GET", "/healthz", f"127.0.0.1:{port}") == 200
                except OSError:
                    pass
                if up:
                    break
                time.sleep(0.1)
            if not r.check(f"{binary.relative_to(ROOT) if binary.is_relative_to(ROOT) else binary} "
                           "serves with the rendered config and env", up,
                           log.read_text(errors="replace").strip()[-2000:]):
                return
            # kubelet probes send the pod IP as Host.
            r.check("GET /healthz and /readyz answer 200 to a probe's Host",
                    http_status(port, "GET", "/healthz", f"10.0.0.7:{port}") == 200
                    and http_status(port, "GET", "/readyz", f"10.0.0.7:{port}") == 200)
            tenants = facts["config"].get("tenants", [{"slug": "demo"}])
            if not tenants:
                return
            path = f"/t/{tenants[0]['slug']}/mcp"
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                               "clientInfo": {"name": "helm-check", "version": "1"}}}
            statuses = {h: http_status(port, "POST", path, f"{h}:{port}", init)
                        for h in facts["hosts"] if h != "*"}
            r.check(f"POST {path} initialize accepted for every allowed Host",
                    all(s == 200 for s in statuses.values()), str(statuses))
            evil = http_status(port, "POST", path, "evil.example.com", init)
            r.check("an unlisted Host is refused (403)", evil == 403, f"got {evil}")
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def main() -> int:
    latest = kubernetes_validate.utils.latest_version()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kube-version", action="append", dest="kube_versions",
                    help=f"Kubernetes version(s) to validate against (default: 1.29.0 and {latest})")
    ap.add_argument("--binary", help="mcp-harbor binary for the boot check "
                    "(default: $MCP_HARBOR_BIN, target/release, target/debug)")
    ap.add_argument("--no-boot", action="store_true", help="skip the boot check")
    ap.add_argument("--chart", type=Path, default=CHART, help="chart directory (default: %(default)s)")
    args = ap.parse_args()
    chart_dir = args.chart.resolve()
    kube_versions = args.kube_versions or ["1.29.0", latest]
    binary = None if args.no_boot else find_binary(args.binary)
    if args.binary and binary is None:
        sys.exit(f"helm/check.py: --binary {args.binary} is not an executable file")

    r = Report()
    print(f"helm-python-sdk {helm.__version__} (Helm SDK {helm.helm_sdk_version()}), "
          f"kubernetes-validate {kubernetes_validate.__version__}; chart {chart_dir}")
    with helm.Chart.load(chart_dir) as chart:
        meta = chart.metadata
        print(f"\n[chart] {meta['name']} {meta['version']} (appVersion {meta.get('appVersion')})")
        r.check("Chart.yaml: apiVersion v2, appVersion 0.1.0",
                meta.get("apiVersion") == "v2" and meta.get("appVersion") == "0.1.0")
        r.check("values.schema.json is present", chart.schema is not None)
        for name, bad in BAD_VALUES.items():
            try:
                chart.validate_schema(bad)
                r.check(f"schema rejects {name}", False, f"{bad} was accepted")
            except helm.HelmValuesError:
                r.check(f"schema rejects {name}", True)

        for scenario, values in SCENARIOS.items():
            print(f"\n[{scenario}] values {json.dumps(values) if values else '(chart defaults)'}")
            r.run("values match values.schema.json", lambda: chart.validate_schema(values))
            check_lint(r, chart_dir, values, kube_versions[0])
            rendered = r.run(f"render as release {RELEASE!r} in namespace {NAMESPACE!r}",
                             lambda: chart.render(values, name=RELEASE, namespace=NAMESPACE,
                                                  is_install=True))
            if rendered is None:
                continue
            r.check("NOTES.txt renders", bool(rendered.get(f"{chart.name}/templates/NOTES.txt", "").strip()))
            docs = r.run("manifests are YAML", lambda: [
                d for path, text in sorted(rendered.items()) if not path.endswith("NOTES.txt")
                for d in yaml.safe_load_all(text) if d])
            if docs is None:
                continue
            check_manifests(r, docs, kube_versions)
            facts = check_chart_promises(r, values, chart, rendered, docs)
            if binary is None:
                print("  skip  boot check: no built mcp-harbor binary (cargo build --release, or --binary)"
                      if not args.no_boot else "  skip  boot check (--no-boot)")
            elif facts:
                check_boot(r, binary, facts)

    print(f"\nhelm-check: {r.passed} passed, {r.failed} failed")
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
