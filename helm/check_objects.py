"""helm/check.py's checks of what the chart puts in front of and around the pods: the routes
(Ingress and Gateway API HTTPRoute: the public paths only, the admin API apart), autoscaling on an
MCP metric (HorizontalPodAutoscaler or KEDA ScaledObject), the PodDisruptionBudget, NetworkPolicy
egress, the PrometheusRule and the Grafana dashboard, and the names of the server's metrics they
query. Each function takes check.py's Report and records its findings there.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

# Paths a client or browser must reach through the public route, and paths it must never reach.
PUBLIC_PATHS = ("/t/demo/mcp", "/t/demo/sse", "/t/demo/oauth/token",
                "/.well-known/oauth-protected-resource/t/demo/mcp", "/authorize", "/token", "/register")
PRIVATE_PATHS = ("/admin/v1", "/admin/v1/tenants", "/admin/v1/openapi.json", "/metrics", "/healthz")
# The metric each autoscaling.metric names.
AUTOSCALING_METRICS = {"sessions": "mcp_harbor_sessions_active", "streams": "mcp_harbor_sse_streams_open",
                       "connections": "mcp_harbor_http_connections_open"}
# The alerts the issue asks for, by what they watch.
ALERTS = {"MCPHarborSSEStreamsOverflowing": "overflowing streams", "MCPHarborWriteTimeouts": "write timeouts",
          "MCPHarborQuotaUnchecked": "unchecked quotas", "MCPHarborHighErrorRate": "5xx",
          "MCPHarborTenantRateLimited": "rate limiting", "MCPHarborReplicasBelowFloor": "lost replicas",
          "MCPHarborDown": "no replica", "MCPHarborStreamResumptionsFailing": "failed resumptions"}
METRIC_TOKEN = re.compile(r"\b(mcp_(?:harbor|server)_[a-z0-9_]+)\b")
# Suffixes of a family's samples in the OpenMetrics text, by type.
SAMPLE_SUFFIXES = {"counter": ("_total",), "info": ("_info",), "gauge": ("",),
                   "histogram": ("_bucket", "_sum", "_count"), "unknown": ("",)}


def sample_names(families: dict[str, str]) -> set[str]:
    """The sample names a PromQL query can use, from family name -> type."""
    return {name + suffix for name, kind in families.items() for suffix in SAMPLE_SUFFIXES.get(kind, ("",))}


def families_from_text(text: str) -> dict[str, str]:
    """Family name -> type, from the `# TYPE` lines of a /metrics answer."""
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))


def families_from_server(binary: Path) -> dict[str, str]:
    """The families a freshly started server serves on its metrics listener."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        metrics_port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as data:
        env = {"MCP_HARBOR__SERVER__PORT": "0", "MCP_HARBOR__STORAGE__DATA_DIR": data,
               "MCP_HARBOR__METRICS__LISTEN": f"127.0.0.1:{metrics_port}",
               "MCP_HARBOR__LOG__FILTER": "warn", "PATH": "/usr/bin:/bin"}
        proc = subprocess.Popen([str(binary), "serve"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2) as r:
                        return families_from_text(r.read().decode())
                except OSError:
                    time.sleep(0.1)
            raise RuntimeError("the server's metrics listener did not answer within 15 s")
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def families_from_source(metrics_rs: Path) -> dict[str, str]:
    """Family name -> type, read from src/observe/metrics.rs's registrations (when no binary is built):
    the registered name (with `_seconds` for Unit::Seconds) and the type of what is registered."""
    text = metrics_rs.read_text()
    kinds = {}
    for var, decl in re.findall(r"let (\w+)(?:: [^=]+)? = ([^;]+);", text):
        kind = ("histogram" if "latency" in decl or "lifetimes" in decl or "Histogram" in decl
                else "counter" if "Counter" in decl else "gauge" if "Gauge" in decl else None)
        if kind:
            kinds[var] = kind
    out = {}
    for call in re.finditer(r"registry\.register\(\s*\"([a-z_]+)\",\s*\"(?:[^\"\\]|\\[\s\S])*\",\s*"
                            r"(?:(Some\(Unit::Seconds\)),\s*|None,\s*)([\w:]+)", text):
        name = call.group(1) + ("_seconds" if call.group(2) else "")
        target = call.group(3)
        out[name] = "info" if target.startswith("Info::") else kinds.get(target, "unknown")
    return out


def metric_tokens(expr: str) -> set[str]:
    return set(METRIC_TOKEN.findall(expr))


def _prefix_match(path: str, prefix: str) -> bool:
    """Kubernetes Ingress `Prefix` and Gateway API `PathPrefix`: element-wise."""
    prefix = prefix.rstrip("/") or "/"
    return prefix == "/" or path == prefix or path.startswith(prefix + "/")


def ingress_reaches(ingress: dict, path: str) -> bool:
    for rule in ingress["spec"].get("rules", []):
        for p in rule.get("http", {}).get("paths", []):
            kind = p.get("pathType", "ImplementationSpecific")
            if (kind == "Exact" and p["path"] == path) or (kind != "Exact" and _prefix_match(path, p["path"])):
                return True
    return False


def route_reaches(route: dict, path: str) -> bool:
    for rule in route["spec"].get("rules", []):
        for match in rule.get("matches") or [{"path": {"type": "PathPrefix", "value": "/"}}]:
            m = match.get("path", {"type": "PathPrefix", "value": "/"})
            if (m["type"] == "Exact" and m["value"] == path) or (
                    m["type"] == "PathPrefix" and _prefix_match(path, m["value"])):
                return True
    return False


def is_admin(doc: dict) -> bool:
    return doc["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "admin"


def check_routes(r, merged: dict, docs: list[dict], svc: dict) -> None:
    """No public Ingress or HTTPRoute reaches /admin/v1 (or /metrics); the admin ones reach only it."""
    ingresses = [d for d in docs if d["kind"] == "Ingress"]
    routes = [d for d in docs if d["kind"] == "HTTPRoute"]
    for doc in ingresses + routes:
        reaches = ingress_reaches if doc["kind"] == "Ingress" else route_reaches
        name = f"{doc['kind']}/{doc['metadata']['name']}"
        if is_admin(doc):
            r.check(f"{name} (admin) routes /admin/v1 and nothing else",
                    reaches(doc, "/admin/v1/tenants") and not any(reaches(doc, p) for p in PUBLIC_PATHS + ("/metrics",)))
        else:
            blocked = [p for p in PRIVATE_PATHS if reaches(doc, p)]
            missing = [p for p in PUBLIC_PATHS if not reaches(doc, p)]
            r.check(f"{name} routes every public path and never /admin/v1, /metrics or the probes",
                    not blocked and not missing, f"reaches {blocked}, misses {missing}")
    ing = merged["ingress"]
    want_admin_ing = 1 if ing["admin"]["enabled"] else 0
    r.check(f"admin Ingress only with ingress.admin.enabled ({want_admin_ing})",
            sum(is_admin(d) for d in ingresses) == want_admin_ing)
    hr = merged["httpRoute"]
    if hr["enabled"]:
        (public,) = [d for d in routes if not is_admin(d)]
        rule = public["spec"]["rules"][0]
        r.check("HTTPRoute: the Gateways and hosts from values, the Service's port as backend",
                public["spec"]["parentRefs"] == hr["parentRefs"] and public["spec"]["hostnames"] == hr["hostnames"]
                and rule["backendRefs"] == [{"name": svc["metadata"]["name"], "port": merged["service"]["port"]}],
                json.dumps(public["spec"])[:400])
        r.check("HTTPRoute timeouts are SSE-safe (0s: none) or as configured",
                rule.get("timeouts") == hr["timeouts"] and hr["timeouts"]["request"] in ("0s", rule["timeouts"]["request"]))
    r.check("admin HTTPRoute only with httpRoute.admin.enabled",
            sum(is_admin(d) for d in routes) == (1 if hr["admin"]["enabled"] else 0))


def check_autoscaling(r, merged: dict, docs: list[dict], dep: dict, exported: set[str]) -> None:
    a = merged["autoscaling"]
    hpas = [d for d in docs if d["kind"] == "HorizontalPodAutoscaler"]
    scaled = [d for d in docs if d["kind"] == "ScaledObject"]
    if not a["enabled"]:
        r.check("no autoscaler without autoscaling.enabled", not hpas and not scaled)
        return
    metric = AUTOSCALING_METRICS[a["metric"]]
    r.check(f"autoscaling.metric {a['metric']} is {metric}, a metric the server exports", metric in exported)
    r.check("no fixed replicas on the Deployment", "replicas" not in dep["spec"])
    if a["provider"] == "hpa":
        if not r.check("one HorizontalPodAutoscaler, no ScaledObject", len(hpas) == 1 and not scaled):
            return
        spec = hpas[0]["spec"]
        pods = [m for m in spec["metrics"] if m["type"] == "Pods"]
        cpu = [m for m in spec["metrics"] if m["type"] == "Resource" and m["resource"]["name"] == "cpu"]
        r.check(f"the HPA has a non-CPU metric: {metric} per pod, AverageValue {a['targetPerPod']}",
                len(pods) == 1 and pods[0]["pods"]["metric"]["name"] == metric
                and pods[0]["pods"]["target"] == {"type": "AverageValue", "averageValue": str(a["targetPerPod"])},
                json.dumps(spec["metrics"]))
        r.check("CPU beside it when targetCPUUtilizationPercentage is set",
                [m["resource"]["target"]["averageUtilization"] for m in cpu]
                == ([a["targetCPUUtilizationPercentage"]] if a["targetCPUUtilizationPercentage"] else []))
        r.check("the HPA scales the Deployment between min and max",
                spec["scaleTargetRef"]["name"] == dep["metadata"]["name"]
                and spec["minReplicas"] == a["minReplicas"] and spec["maxReplicas"] == a["maxReplicas"])
        behavior = spec.get("behavior", {})
    else:
        if not r.check("one KEDA ScaledObject, no HorizontalPodAutoscaler of the chart's", len(scaled) == 1 and not hpas):
            return
        spec = scaled[0]["spec"]
        prom = [t for t in spec["triggers"] if t["type"] == "prometheus"]
        query = prom[0]["metadata"]["query"] if prom else ""
        r.check(f"the ScaledObject's Prometheus trigger sums {metric}, threshold {a['targetPerPod']} per pod",
                len(prom) == 1 and metric in query and prom[0]["metadata"]["threshold"] == str(a["targetPerPod"])
                and prom[0].get("metricType") == "AverageValue"
                and prom[0]["metadata"]["serverAddress"] == a["keda"]["serverAddress"], json.dumps(prom))
        r.check("the KEDA query names only metrics the server exports",
                bool(metric_tokens(query)) and metric_tokens(query) <= exported, query)
        r.check("the ScaledObject scales the Deployment between min and max",
                spec["scaleTargetRef"]["name"] == dep["metadata"]["name"]
                and spec["minReplicaCount"] == a["minReplicas"] and spec["maxReplicaCount"] == a["maxReplicas"])
        behavior = spec.get("advanced", {}).get("horizontalPodAutoscalerConfig", {}).get("behavior", {})
    window = behavior.get("scaleDown", {}).get("stabilizationWindowSeconds", 300)
    r.check(f"slow scale-down: {window} s of lower load before a pod is drained (at least 600)",
            window >= 600 and behavior == a["behavior"])


def check_disruption_budget(r, merged: dict, docs: list[dict], labels: dict) -> None:
    a = merged["autoscaling"]
    many = a["enabled"] or merged["replicaCount"] > 1
    floor = a["minReplicas"] if a["enabled"] else merged["replicaCount"]
    pdbs = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    if not (many and merged["podDisruptionBudget"]["enabled"]):
        r.check("no PodDisruptionBudget for a lone replica or when disabled", not pdbs)
        return
    if not r.check("a PodDisruptionBudget selecting the pods", len(pdbs) == 1
                   and pdbs[0]["spec"]["selector"]["matchLabels"] == labels):
        return
    spec = pdbs[0]["spec"]
    if floor == 1:
        r.check("replica floor 1: the budget keeps that pod (minAvailable 1), never lets the only pod go",
                spec.get("minAvailable") == 1 and "maxUnavailable" not in spec, json.dumps(spec))
    else:
        most = spec.get("maxUnavailable")
        r.check(f"maxUnavailable {most} leaves a replica of the floor of {floor} serving",
                isinstance(most, str) or (isinstance(most, int) and 1 <= most < floor), json.dumps(spec))


def check_egress(r, merged: dict, netpol: dict | None, labels: dict, postgres: bool, redis: bool) -> None:
    e = merged["networkPolicy"]["egress"]
    if netpol is None:
        return
    spec = netpol["spec"]
    if not e["enabled"]:
        r.check("networkPolicy.egress.enabled false: egress left open (no Egress policy type)",
                spec.get("policyTypes") == ["Ingress"] and "egress" not in spec)
        return
    rules = spec.get("egress", [])
    r.check("the NetworkPolicy restricts Egress too", spec.get("policyTypes") == ["Ingress", "Egress"])
    r.check("every egress rule names its ports (none opens everything)", all(rule.get("ports") for rule in rules))
    ports = lambda rule: {(p["port"], p.get("protocol", "TCP")) for p in rule["ports"]}  # noqa: E731
    r.check("DNS (53 UDP and TCP) to the configured resolvers",
            any(ports(rule) == {(53, "UDP"), (53, "TCP")} and rule.get("to") == e["dns"] for rule in rules))
    r.check("the release's pods reach each other (forwarding to a session's owner)",
            any(rule.get("to") == [{"podSelector": {"matchLabels": labels}}]
                and ports(rule) == {(merged["containerPort"], "TCP")} for rule in rules))
    for store, used in (("postgres", postgres), ("redis", redis)):
        port = e[store]["port"]
        present = any(ports(rule) == {(port, "TCP")} and rule.get("to", []) == e[store]["to"] for rule in rules)
        r.check(f"{store} egress on port {port} {'present' if used else 'absent'}", present == used)
    endpoint = merged["telemetry"]["otlp"]["endpoint"]
    if endpoint:
        m = re.match(r"^(https?)://[^/:]+(?::(\d+))?", endpoint)
        port = int(m.group(2) or (443 if m.group(1) == "https" else 80))
        r.check(f"egress to the OTLP collector on port {port}",
                any(ports(rule) == {(port, "TCP")} for rule in rules))
    internet = [rule for rule in rules if any(peer.get("ipBlock", {}).get("cidr") in ("0.0.0.0/0", "::/0")
                                              for peer in rule.get("to", []))]
    if e["internet"]["enabled"]:
        blocks = [peer["ipBlock"] for rule in internet for peer in rule["to"]]
        excepted = {c for b in blocks for c in b.get("except", [])}
        r.check("tenant-supplied URLs: public addresses only (private, link-local and loopback ranges "
                f"excepted), on ports {e['internet']['ports']}",
                len(internet) == 1 and {b["cidr"] for b in blocks} == {"0.0.0.0/0", "::/0"}
                and {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "fc00::/7"} <= excepted
                and ports(internet[0]) == {(p, "TCP") for p in e["internet"]["ports"]}, json.dumps(internet))
    else:
        r.check("no internet egress with networkPolicy.egress.internet.enabled false", not internet)


def check_prometheus_rule(r, merged: dict, docs: list[dict], exported: set[str], runbooks: str | None) -> None:
    want = merged["metrics"]["prometheusRule"]
    rules = [d for d in docs if d["kind"] == "PrometheusRule"]
    if not want["enabled"]:
        r.check("no PrometheusRule unless metrics.prometheusRule.enabled", not rules)
        return
    if not r.check("a PrometheusRule renders", len(rules) == 1):
        return
    alerts = [rule for group in rules[0]["spec"]["groups"] for rule in group["rules"]]
    names = {a["alert"] for a in alerts}
    r.check(f"alerts for {', '.join(ALERTS.values())}", set(ALERTS) <= names, f"missing {set(ALERTS) - names}")
    unknown = {a["alert"]: metric_tokens(a["expr"]) - exported for a in alerts if metric_tokens(a["expr"]) - exported}
    r.check("every alert's expression names metrics the server exports (and at least one)",
            not unknown and all(metric_tokens(a["expr"]) for a in alerts), str(unknown))
    r.check("every alert has a severity, a summary and a runbook",
            all(a["labels"].get("severity") and a["annotations"].get("summary") and a["annotations"].get("runbook")
                for a in alerts))
    if want["runbookBaseUrl"]:
        r.check("runbook_url points at <runbookBaseUrl>#<alert>",
                all(a["annotations"].get("runbook_url") == f"{want['runbookBaseUrl']}#{a['alert'].lower()}" for a in alerts))
    if runbooks is not None:
        headings = set(re.findall(r"^#+ (MCPHarbor\w+)\s*$", runbooks, re.M))
        r.check("docs/observability.md has a runbook section for every alert", names <= headings,
                f"missing {sorted(names - headings)}")
    r.check("PrometheusRule labels include metrics.prometheusRule.labels",
            want["labels"].items() <= rules[0]["metadata"].get("labels", {}).items())


def check_dashboard(r, merged: dict, docs: list[dict], exported: set[str]) -> None:
    want = merged["metrics"]["dashboard"]
    maps = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-dashboard")]
    if not want["enabled"]:
        r.check("no dashboard ConfigMap unless metrics.dashboard.enabled", not maps)
        return
    if not r.check("a dashboard ConfigMap renders with the sidecar's labels",
                   len(maps) == 1 and want["labels"].items() <= maps[0]["metadata"].get("labels", {}).items()):
        return
    (text,) = maps[0]["data"].values()
    dashboard = r.run("the dashboard is JSON", lambda: json.loads(text))
    if dashboard is None:
        return
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    used = set().union(*(metric_tokens(e) for e in exprs)) if exprs else set()
    unknown = sorted(used - exported)
    r.check(f"the dashboard's {len(exprs)} queries each name a metric, all exported by the server",
            bool(exprs) and all(metric_tokens(e) for e in exprs) and not unknown, f"unknown {unknown}")
    topics = {"requests": "mcp_harbor_http_requests_total", "latency": "mcp_server_operation_duration_seconds_bucket",
              "errors per tenant and method": "mcp_server_operation_duration_seconds_count",
              "sessions": "mcp_harbor_sessions_active", "streams": "mcp_harbor_sse_streams_open",
              "replicas": "mcp_harbor_build_info", "resumptions after takeovers": "mcp_harbor_event_log_replays_total"}
    missing = [t for t, m in topics.items() if m not in used]
    r.check(f"the dashboard shows {', '.join(topics)}", not missing, f"missing {missing}")
