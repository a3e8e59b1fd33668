#!/usr/bin/env python3
"""Render, lint and validate the mcp-harbor Helm chart offline, with no helm binary or cluster.

  helm/install-check-deps.sh                              # once: venv with the two packages below
  ~/.cache/mcp-harbor/helmenv/bin/python helm/check.py    # [--binary target/release/mcp-harbor]

For each scenario (SCENARIOS below: defaults; ingress with TLS, allowedHosts, allowedOrigins and
extraEnv; SQLite on a PersistentVolumeClaim; PostgreSQL from existing Secrets with the migration
hook Job; the PostgreSQL URL inline; values-production.yaml (HPA on streams per pod, alerts,
dashboard, egress policy); an inline admin token; OTLP export; OTLP/gRPC; KEDA with a floor of one
replica; Gateway API routes on IPv6 with every extension point; an existing ServiceAccount with TLS
Secrets for the data stores) it
  1. validates the values against values.schema.json and lints the chart (helm-python-sdk, which
     bundles Helm's own Go SDK),
  2. renders the chart and validates every manifest, hooks included, against the Kubernetes
     OpenAPI schemas of the oldest and newest Kubernetes versions checked (kubernetes-validate,
     strict: unknown fields fail); the custom resources (ServiceMonitor, PrometheusRule,
     ScaledObject, HTTPRoute) against the structural schemas of helm/crd_schemas.py,
  3. checks what the chart promises: config mounted where MCP_HARBOR_CONFIG points, host 0.0.0.0,
     probes on /healthz and /readyz, non-root read-only pod, config/secret checksums, allowed
     hosts, ingress; storage (SQLite data dir on a writable volume: emptyDir or the PVC; or the
     PostgreSQL URL from a Secret, migrate-on-start off and a pre-install/pre-upgrade Job running
     `mcp-harbor migrate` with the same environment, reading only what exists before install);
     the admin token from a Secret (secretKeyRef) or, without one, NOTES telling where the
     generated token is printed; OpenTelemetry settings as env vars only when an endpoint is set,
     collector headers only through a secretKeyRef, OTEL_RESOURCE_ATTRIBUTES from the downward
     API; the ServiceMonitor selecting the Service's labels and its "metrics" port; and, through
     helm/check_objects.py: no public Ingress or HTTPRoute route reaches /admin/v1, the autoscaler
     has a non-CPU MCP metric and a slow scale-down, the disruption budget never lets the last pod
     go, egress is limited to what the server calls, the PrometheusRule and the dashboard render
     and their PromQL names only metrics the server exports (its real /metrics when a binary is
     found, else src/observe/metrics.rs's registrations),
  4. when a built server binary is found, boots it with the rendered config and environment (the
     container's volume mounts remapped to temporary directories, secretKeyRefs resolved) and
     checks /healthz, /readyz, that every allowed Host and browser Origin (and no other) may
     initialize a session, that the SQLite file lands on the data volume, and the admin API: GET /admin/v1/tenants
     answers 200 with the token (configured, or the one the server printed) and 401 without;
     a generated token survives a restart on the same data volume. With OTLP export configured
     the server boots although the rendered collector is unreachable, and (OTLP/HTTP) a second
     boot pointed at a stand-in collector on loopback shows traces and metrics arriving with the
     Secret's headers and the pod's resource attributes.
     PostgreSQL scenarios use a fresh database on --postgres (created and dropped with psql;
     skipped, saying why, when it is unreachable) and run `mcp-harbor migrate` with the Job's
     environment first when the binary has that subcommand.
It also checks that values.schema.json rejects bad values, that the chart refuses impossible
combinations with a message, that Chart.yaml's kubeVersion matches the oldest Kubernetes validated,
and that the values table of the chart's README.md is what helm/values_table.py generates. Exit
status 1 on any failure.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import http.client
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path

try:
    import helm_python as helm
    import jsonschema  # kubernetes-validate's own dependency
    import kubernetes_validate
    import yaml
except ImportError as e:
    sys.exit(f"helm/check.py: {e}; run helm/install-check-deps.sh and use "
             "~/.cache/mcp-harbor/helmenv/bin/python")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import check_objects  # noqa: E402 - helm/'s own modules, beside this file
import crd_schemas  # noqa: E402
import values_table  # noqa: E402

CHART = HERE / "mcp-harbor"
RELEASE, NAMESPACE = "harbor", "mcp"
# src/config.rs, deny_unknown_fields
CONFIG_SECTIONS = {"server", "sessions", "modern", "log", "storage", "admin", "webhooks", "redis", "cluster",
                   "auth", "tls", "metrics", "telemetry", "tenants"}
# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion; the preStop sleep action).
OLDEST_KUBE = "1.30.0"
# Every scenario names the image: the chart has no default repository (none is published).
IMAGE = {"image": {"repository": "registry.example.com/platform/mcp-harbor"}}
# Scenarios rendered and validated but not booted, and why.
NO_BOOT = {"store-tls": "its Secrets are mounted at the pod's paths; .ci/run boots the release binary against TLS PostgreSQL and Redis (stage \"stores over TLS\")"}
DATA_MOUNT = "/var/lib/mcp-harbor"
HOOK, HOOK_WEIGHT, HOOK_DELETE = ("helm.sh/hook", "helm.sh/hook-weight",
                                  "helm.sh/hook-delete-policy")
GENERATED_TOKEN = re.compile(r"generated the admin API token[^:]*: (\S+)")

ADMIN_TOKEN = "helm-check-admin-token-0123456789"
OTLP_HEADERS = "x-api-key=helm-check-otlp-key,x-tenant=harbor"
SEALING_KEYS = "k2:" + "A" * 43 + "=,k1:" + "B" * 42 + "A="
# Secrets an operator creates before `helm install` in the scenarios that name them.
# "<database>" stands for the PostgreSQL URL (a fresh local database when booting).
# "<redis>" stands for the Redis URL (the local Redis, with a fresh key prefix, when booting).
EXISTING_SECRETS = {"harbor-db": {"url": "<database>"}, "harbor-admin": {"token": ADMIN_TOKEN},
                    "harbor-redis": {"url": "<redis>"}, "harbor-seal": {"keys": SEALING_KEYS},
                    "harbor-otlp": {"headers": OTLP_HEADERS}}
# What the downward API gives a pod (fieldRef), as the boot check stands in for it.
POD_FIELDS = {"metadata.name": "harbor-mcp-harbor-5d8c7-x2x9q", "status.podIP": "127.0.0.1",
              "metadata.namespace": NAMESPACE, "spec.nodeName": "node-a"}
# Environment variables the chart sets only when telemetry.otlp.endpoint is.
TELEMETRY_ENV = ("MCP_HARBOR__TELEMETRY__OTLP_ENDPOINT", "MCP_HARBOR__TELEMETRY__OTLP_PROTOCOL",
                 "MCP_HARBOR__TELEMETRY__SAMPLING_RATIO", "MCP_HARBOR__TELEMETRY__METRICS_INTERVAL_MS",
                 "MCP_HARBOR__TELEMETRY__SERVICE_NAME", "MCP_HARBOR__TELEMETRY__TRACES",
                 "MCP_HARBOR__TELEMETRY__METRICS", "OTEL_EXPORTER_OTLP_HEADERS",
                 "OTEL_RESOURCE_ATTRIBUTES")
SCENARIOS: dict[str, dict] = {
    "defaults": {},
    "ingress": {
        "ingress": {
            "enabled": True,
            "className": "nginx",
            "host": "mcp.example.com",
            "annotations": {
                "nginx.ingress.kubernetes.io/upstream-hash-by": "$mcp_affinity",
                "nginx.ingress.kubernetes.io/proxy-buffering": "off",
            },
            "tls": {"enabled": True},
        },
        "allowedHosts": ["mcp.internal.example.com"],
        "allowedOrigins": ["https://inspector.example.com"],
        "extraEnv": [{"name": "MCP_HARBOR__SESSIONS__IDLE_TIMEOUT_SECS", "value": "600"}],
        "podAnnotations": {"example.com/team": "mcp"},
    },
    "persistence": {
        "persistence": {"enabled": True, "size": "5Gi", "storageClass": "fast-ssd",
                        "accessModes": ["ReadWriteOnce"],
                        "annotations": {"helm.sh/resource-policy": "keep"}},
    },
    "postgres": {
        "storage": {"existingSecret": "harbor-db", "databaseUrlKey": "url", "maxConnections": 20},
        "admin": {"existingSecret": "harbor-admin", "tokenKey": "token"},
        "redis": {"existingSecret": "harbor-redis", "urlKey": "url", "keyPrefix": "harbor-check"},
        "auth": {"existingSecret": "harbor-seal", "sealingKeysKey": "keys"},
        "drainGraceSeconds": 30,
        "replicaCount": 2,
        "migration": {"podAnnotations": {"sidecar.istio.io/inject": "false"}},
        # The migration Job runs as a hook copy of the chart's ServiceAccount, annotations included.
        "serviceAccount": {"annotations": {"iam.example.com/role": "harbor-migrate"}},
        # The migration Job gets the same telemetry env (and reads the headers Secret) too.
        "telemetry": {"otlp": {"endpoint": "https://otlp.vendor.example.com/otlp", "protocol": "http/protobuf",
                               "headersSecret": {"name": "harbor-otlp", "key": "headers"}}},
    },
    "postgres-inline": {
        "storage": {"databaseUrl": "postgres://harbor:s3cret@postgres.db.svc:5432/harbor"},
        "redis": {"url": "redis://redis.db.svc:6379/0"},
        "auth": {"sealingKeys": SEALING_KEYS, "publicUrl": "https://mcp.example.com"},
        "replicaCount": 3,
    },
    # helm/mcp-harbor/values-production.yaml, loaded below.
    "production": {},
    "admin-token": {
        "admin": {"token": ADMIN_TOKEN, "allowHttpLoopbackWebhooks": True},
    },
    # OTLP/HTTP to a collector that does not resolve here (the server must boot regardless), the
    # collector's API key from a Secret, JSON logs, and Prometheus through a ServiceMonitor that
    # the NetworkPolicy lets in from the monitoring namespace.
    "telemetry": {
        "telemetry": {
            "otlp": {"endpoint": "http://otel-collector.observability.svc:4318",
                     "protocol": "http/protobuf",
                     "headersSecret": {"name": "harbor-otlp", "key": "headers"}},
            "samplingRatio": 0.25,
            "metricsIntervalMs": 10000,
            "serviceName": "harbor-check",
            "logFormat": "json",
        },
        "metrics": {"enabled": True, "port": 9465,
                    "serviceMonitor": {"enabled": True, "interval": "15s", "scrapeTimeout": "5s",
                                       "labels": {"release": "kube-prometheus-stack"}}},
        "networkPolicy": {"enabled": True, "metricsFrom": [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
            "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gateway"}}}]},
    },
    # OTLP/gRPC, traces only, a tiny sampling ratio (rendered in fixed point), no headers.
    "telemetry-grpc": {
        "telemetry": {
            "otlp": {"endpoint": "http://otel-collector.observability.svc:4317", "protocol": "grpc"},
            "samplingRatio": 0.00001,
            "metrics": False,
            "logFormat": "plain",
        },
    },
    # KEDA on sessions per pod with a floor of one replica (the budget keeps that pod), the alerts
    # with runbook links and the dashboard, egress without the internet rule.
    "keda": {
        "storage": {"databaseUrl": "postgres://harbor:s3cret@postgres.db.svc:5432/harbor"},
        "redis": {"url": "redis://redis.db.svc:6379/0"},
        "auth": {"sealingKeys": SEALING_KEYS},
        "autoscaling": {"enabled": True, "provider": "keda", "minReplicas": 1, "maxReplicas": 6,
                        "metric": "sessions", "targetPerPod": 300, "targetCPUUtilizationPercentage": None,
                        "keda": {"serverAddress": "http://prometheus-operated.monitoring.svc:9090"}},
        "metrics": {"enabled": True,
                    "prometheusRule": {"enabled": True, "labels": {"release": "kube-prometheus-stack"},
                                       "runbookBaseUrl": "https://docs.example.com/mcp-harbor/observability"},
                    "dashboard": {"enabled": True, "annotations": {"grafana_folder": "MCP"}}},
        "networkPolicy": {"enabled": True, "egress": {"internet": {"enabled": False},
                                                      "postgres": {"to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}], "port": 5432}}},
    },
    # Gateway API routes (public, and the admin API on an internal Gateway) and an admin Ingress,
    # on an IPv6 cluster, with every extension point.
    "gateway-ipv6": {
        "ipFamily": "IPv6",
        "httpRoute": {"enabled": True, "hostnames": ["mcp.example.com"],
                      "parentRefs": [{"name": "public", "namespace": "gateway-system", "sectionName": "https"}],
                      "admin": {"enabled": True, "hostnames": ["mcp-admin.internal.example.com"],
                                "parentRefs": [{"name": "internal", "namespace": "gateway-system"}]}},
        "ingress": {"enabled": False, "className": "nginx",
                    "admin": {"enabled": True, "host": "admin.internal.example.com",
                              "annotations": {"nginx.ingress.kubernetes.io/whitelist-source-range": "10.0.0.0/8"},
                              "tls": {"enabled": True}}},
        "trustedProxies": ["fd00:10:244::/56"],
        "image": {"digest": "sha256:" + "ab" * 32},
        "service": {"annotations": {"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}},
        "extraEnvFrom": [{"configMapRef": {"name": "harbor-extra-env"}}],
        "extraVolumes": [{"name": "scratch", "emptyDir": {}}],
        "extraVolumeMounts": [{"name": "scratch", "mountPath": "/var/scratch"}],
        "initContainers": [{"name": "wait", "image": "busybox:1.36", "command": ["true"]}],
        "sidecars": [{"name": "shipper", "image": "fluent/fluent-bit:3.0"}],
        "priorityClassName": "mcp-critical",
        "podLabels": {"team": "mcp"},
        "startupProbe": {"periodSeconds": 5, "failureThreshold": 12},
    },
    # An existing ServiceAccount (the migration Job runs as it too) and TLS Secrets for PostgreSQL
    # and Redis mounted for the issue 61 item 1 settings.
    "store-tls": {
        "serviceAccount": {"create": False, "name": "harbor-sa"},
        "storage": {"existingSecret": "harbor-db", "databaseUrlKey": "url", "tls": {"secretName": "harbor-pg-tls"}},
        "redis": {"existingSecret": "harbor-redis", "urlKey": "url",
                  "tls": {"secretName": "harbor-redis-tls", "caKey": "ca.crt", "certKey": "tls.crt", "keyKey": "tls.key"}},
        "auth": {"existingSecret": "harbor-seal", "sealingKeysKey": "keys"},
    },
}

SCENARIOS["production"] = json.loads(json.dumps(
    yaml.safe_load((CHART / "values-production.yaml").read_text())))


def with_image(values: dict) -> dict:
    """values with IMAGE's repository (the chart refuses to render without one)."""
    return values | {"image": IMAGE["image"] | values.get("image", {})}


SCENARIOS = {name: with_image(values) for name, values in SCENARIOS.items()}

# Values the schema must refuse.
BAD_VALUES: dict[str, dict] = {
    "replicaCount is a string": {"replicaCount": "two"},
    "service.port out of range": {"service": {"port": 70000}},
    "unknown top-level key": {"replicas": 2},
    "unknown image.pullPolicy": {"image": {"pullPolicy": "Sometimes"}},
    "ingress enabled without a host": {"ingress": {"enabled": True, "host": ""}},
    "allowedHosts entry with a port": {"allowedHosts": ["mcp.example.com:443"]},
    "allowedOrigins entry without a scheme": {"allowedOrigins": ["inspector.example.com"]},
    "trustedProxies entry that is a host name": {"trustedProxies": ["ingress.internal"]},
    "allowedOrigins entry with a path": {"allowedOrigins": ["https://inspector.example.com/app"]},
    "config is not a string": {"config": 8080},
    "storage.databaseUrl that is not postgres://": {"storage": {"databaseUrl": "mysql://db/x"}},
    "storage.databaseUrl and storage.existingSecret together":
        {"storage": {"databaseUrl": "postgres://db/x", "existingSecret": "db"}},
    "unknown storage key": {"storage": {"dataDir": "/data"}},
    "storage.maxConnections 0": {"storage": {"maxConnections": 0}},
    "persistence.size that is not a quantity": {"persistence": {"enabled": True, "size": "lots"}},
    "unknown persistence.accessModes entry": {"persistence": {"accessModes": ["ReadWriteSometimes"]}},
    "admin.token shorter than 16 characters": {"admin": {"token": "short-token"}},
    "admin.token and admin.existingSecret together":
        {"admin": {"token": ADMIN_TOKEN, "existingSecret": "harbor-admin"}},
    "admin.allowHttpLoopbackWebhooks as a string": {"admin": {"allowHttpLoopbackWebhooks": "no"}},
    "redis.url that is not redis://": {"redis": {"url": "http://redis:6379"}},
    "redis.url and redis.existingSecret together":
        {"redis": {"url": "redis://r:6379", "existingSecret": "redis"}},
    "drainGraceSeconds 0": {"drainGraceSeconds": 0},
    "autoscaling.targetCPUUtilizationPercentage 0":
        {"autoscaling": {"enabled": True, "targetCPUUtilizationPercentage": 0}},
    "podDisruptionBudget.maxUnavailable 0": {"podDisruptionBudget": {"maxUnavailable": 0}},
    "unknown topologySpread.whenUnsatisfiable": {"topologySpread": {"whenUnsatisfiable": "Maybe"}},
    "auth.sealingKeys that are not id:base64": {"auth": {"sealingKeys": "not a key"}},
    "auth.sealingKeys and auth.existingSecret together":
        {"auth": {"sealingKeys": SEALING_KEYS, "existingSecret": "harbor-seal"}},
    "auth.publicUrl with a path": {"auth": {"publicUrl": "https://mcp.example.com/x"}},
    "telemetry.samplingRatio 1.5": {"telemetry": {"samplingRatio": 1.5}},
    "telemetry.samplingRatio below 0": {"telemetry": {"samplingRatio": -0.1}},
    "telemetry.samplingRatio as a string": {"telemetry": {"samplingRatio": "0.5"}},
    'telemetry.otlp.protocol "udp"': {"telemetry": {"otlp": {"protocol": "udp"}}},
    "telemetry.otlp.endpoint without a scheme":
        {"telemetry": {"otlp": {"endpoint": "otel-collector:4318"}}},
    "telemetry.otlp.endpoint grpc://": {"telemetry": {"otlp": {"endpoint": "grpc://otel-collector:4317"}}},
    "telemetry.otlp.endpoint with a query":
        {"telemetry": {"otlp": {"endpoint": "http://otel-collector:4318/?key=secret"}}},
    "telemetry.otlp.headers inline (only headersSecret)":
        {"telemetry": {"otlp": {"headers": "x-api-key=abc"}}},
    "telemetry.otlp.headersSecret as a string": {"telemetry": {"otlp": {"headersSecret": "harbor-otlp"}}},
    "telemetry.otlp.headersSecret with an inline value":
        {"telemetry": {"otlp": {"headersSecret": {"name": "harbor-otlp", "value": "x-api-key=abc"}}}},
    "telemetry.otlp.headersSecret.name that is not a Secret name":
        {"telemetry": {"otlp": {"headersSecret": {"name": "Harbor_OTLP"}}}},
    "telemetry.metricsIntervalMs 500": {"telemetry": {"metricsIntervalMs": 500}},
    "telemetry.metricsIntervalMs not an integer": {"telemetry": {"metricsIntervalMs": 1500.5}},
    "telemetry.serviceName empty": {"telemetry": {"serviceName": ""}},
    'telemetry.logFormat "xml"': {"telemetry": {"logFormat": "xml"}},
    "telemetry.traces as a string": {"telemetry": {"traces": "yes"}},
    "unknown telemetry key": {"telemetry": {"endpoint": "http://otel-collector:4318"}},
    "metrics.serviceMonitor.interval without a unit":
        {"metrics": {"enabled": True, "serviceMonitor": {"enabled": True, "interval": "30"}}},
    "metrics.serviceMonitor.interval 0s":
        {"metrics": {"enabled": True, "serviceMonitor": {"enabled": True, "interval": "0s"}}},
    "metrics.serviceMonitor.scrapeTimeout in words":
        {"metrics": {"enabled": True, "serviceMonitor": {"scrapeTimeout": "10 seconds"}}},
    "metrics.serviceMonitor.labels with a non-string value":
        {"metrics": {"serviceMonitor": {"labels": {"release": 1}}}},
    "unknown metrics.serviceMonitor key":
        {"metrics": {"serviceMonitor": {"enabled": True, "port": "metrics"}}},
    "networkPolicy.metricsFrom not a list": {"networkPolicy": {"metricsFrom": {"podSelector": {}}}},
    "image.repository with a tag": {"image": {"repository": "registry.example.com/mcp-harbor:0.1.0"}},
    "image.digest that is not sha256:<64 hex>": {"image": {"digest": "latest"}},
    "ingress.path (the chart routes the public paths itself)": {"ingress": {"path": "/"}},
    "ingress.admin enabled without a host": {"ingress": {"admin": {"enabled": True}}},
    "httpRoute enabled without parentRefs":
        {"httpRoute": {"enabled": True, "hostnames": ["mcp.example.com"], "parentRefs": []}},
    "httpRoute timeout that is not a duration": {"httpRoute": {"timeouts": {"request": "forever"}}},
    'autoscaling.metric "cpu"': {"autoscaling": {"metric": "cpu"}},
    'autoscaling.provider "vpa"': {"autoscaling": {"provider": "vpa"}},
    "autoscaling.provider keda without keda.serverAddress":
        {"autoscaling": {"enabled": True, "provider": "keda", "keda": {"serverAddress": ""}}},
    "autoscaling.minReplicas 0": {"autoscaling": {"minReplicas": 0}},
    'ipFamily "dual"': {"ipFamily": "dual"},
    "networkPolicy.egress.internet.except entry without a prefix length":
        {"networkPolicy": {"egress": {"internet": {"except": ["10.0.0.0"]}}}},
    "metrics.prometheusRule.errorRatio 2": {"metrics": {"prometheusRule": {"errorRatio": 2}}},
    "sidecars not a list": {"sidecars": {"name": "x"}},
}

# Values that pass the schema but the chart must refuse when rendering, with the message's start.
REFUSED_RENDERS: dict[str, tuple[dict, str]] = {
    "no image.repository (no image is published)": ({"image": {"repository": ""}}, "image.repository is required"),
    "replicaCount 2 on embedded SQLite": ({"replicaCount": 2}, "replicaCount > 1 needs"),
    "replicaCount 2 with PostgreSQL but no Redis":
        ({"replicaCount": 2, "storage": {"databaseUrl": "postgres://db/x"}}, "replicaCount > 1 needs"),
    "autoscaling on embedded SQLite": ({"autoscaling": {"enabled": True}}, "replicaCount > 1 needs"),
    "replicaCount 2 without shared sealing keys":
        ({"replicaCount": 2, "storage": {"databaseUrl": "postgres://db/x"},
          "redis": {"url": "redis://r:6379"}}, "replicaCount > 1 needs"),
    "PostgreSQL without sealing keys":
        ({"storage": {"databaseUrl": "postgres://db/x"}}, "PostgreSQL needs sealing keys"),
    "metrics.serviceMonitor.enabled without metrics.enabled":
        ({"metrics": {"enabled": False, "serviceMonitor": {"enabled": True}}},
         "metrics.serviceMonitor.enabled needs metrics.enabled=true"),
    "metrics.prometheusRule.enabled without metrics.enabled":
        ({"metrics": {"enabled": False, "prometheusRule": {"enabled": True}}},
         "metrics.prometheusRule.enabled needs metrics.enabled=true"),
    "autoscaling without metrics.enabled (no MCP metric to scale on)":
        ({"autoscaling": {"enabled": True}, "storage": {"databaseUrl": "postgres://db/x"},
          "redis": {"url": "redis://r:6379"}, "auth": {"sealingKeys": SEALING_KEYS}},
         "autoscaling.enabled needs metrics.enabled=true"),
    "podDisruptionBudget.maxUnavailable 3 with 3 replicas (every replica could go)":
        ({"replicaCount": 3, "podDisruptionBudget": {"maxUnavailable": 3},
          "storage": {"databaseUrl": "postgres://db/x"}, "redis": {"url": "redis://r:6379"},
          "auth": {"sealingKeys": SEALING_KEYS}}, "would let every replica go"),
}
REFUSED_RENDERS = {name: (values if name.startswith("no image") else with_image(values), message)
                   for name, (values, message) in REFUSED_RENDERS.items()}


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


def is_hook(doc: dict) -> bool:
    return HOOK in (doc["metadata"].get("annotations") or {})


def by_kind(docs: list[dict]) -> dict[str, dict]:
    return {d["kind"]: d for d in docs}


def secret_data(secret: dict) -> dict[str, str]:
    data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
    return data | (secret.get("stringData") or {})


def resolve_env(container: dict, secrets: dict[str, dict[str, str]]) -> dict[str, str]:
    """The container's environment as the kubelet builds it: secretKeyRefs and downward-API
    fieldRefs resolved, $(VAR) references to earlier variables expanded; raises on a dangling
    reference."""
    env = {}
    for e in container.get("env", []):
        if "valueFrom" in e:
            field = e["valueFrom"].get("fieldRef")
            if field is not None:
                if field["fieldPath"] not in POD_FIELDS:
                    raise ValueError(f"{e['name']}: unsupported fieldRef {field}")
                env[e["name"]] = POD_FIELDS[field["fieldPath"]]
                continue
            ref = e["valueFrom"].get("secretKeyRef")
            if ref is None:
                raise ValueError(f"{e['name']}: unsupported valueFrom {e['valueFrom']}")
            if ref["key"] not in secrets.get(ref["name"], {}):
                raise ValueError(f"{e['name']}: no key {ref['key']!r} in Secret {ref['name']!r}")
            env[e["name"]] = secrets[ref["name"]][ref["key"]]
        else:
            env[e["name"]] = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                                    lambda m: env.get(m.group(1), m.group(0)), e.get("value", ""))
    return env


def secret_refs(container: dict) -> dict[str, tuple[str, str]]:
    return {e["name"]: (e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"])
            for e in container.get("env", []) if "secretKeyRef" in e.get("valueFrom", {})}


def mount_of(container: dict, pod_spec: dict, path: str) -> tuple[dict, dict] | None:
    """The volume mount (and its volume) that holds `path`: the longest mountPath prefix."""
    best = None
    for m in container.get("volumeMounts", []):
        mp = m["mountPath"].rstrip("/")
        if path == mp or path.startswith(mp + "/"):
            if best is None or len(mp) > len(best["mountPath"].rstrip("/")):
                best = m
    if best is None:
        return None
    volume = next((v for v in pod_spec.get("volumes", []) if v["name"] == best["name"]), {})
    return best, volume


def check_readme_table(r: Report, chart_dir: Path) -> None:
    """README.md's values table is what helm/values_table.py generates from values.yaml, and every
    value is described (by its own comment or its section's)."""
    current = values_table.readme_table((chart_dir / "README.md").read_text())
    r.check("README.md's values table is generated from values.yaml (helm/values_table.py --write)",
            current == values_table.table(chart_dir), "stale: run helm/values_table.py --write")
    missing = values_table.undescribed(chart_dir)
    r.check("every value in values.yaml has a comment (its own or its section's)", not missing, str(missing))


def check_lint(r: Report, chart_dir: Path, values: dict, kube_version: str) -> None:
    report = helm.lint(chart_dir, values, strict=True, namespace=NAMESPACE,
                       kube_version=f"v{kube_version}")
    findings = [m for m in report["messages"] if m["severity"] >= 2]
    detail = "; ".join(f"{m['path']}: {m['error']}" for m in findings) + "; ".join(report["errors"])
    r.check(f"helm lint --strict (kube {kube_version})",
            not findings and not report["errors"], detail)


def check_manifests(r: Report, docs: list[dict], kube_versions: list[str]) -> None:
    for doc in docs:
        schema = crd_schemas.SCHEMAS.get((doc.get("apiVersion"), doc.get("kind")))
        if schema is not None:
            check_crd_schema(r, doc, schema)
            continue
        for v in kube_versions:
            hook = " (hook)" if is_hook(doc) else ""
            name = f"{doc['kind']}/{doc['metadata']['name']}{hook} valid for Kubernetes {v} (strict)"
            try:
                kubernetes_validate.validate(doc, v, strict=True)
                r.check(name, True)
            except kubernetes_validate.ValidationError as e:
                path = ".".join(str(p) for p in e.path)
                r.check(name, False, f"{path}: {e.message}")
            except (kubernetes_validate.SchemaNotFoundError,
                    kubernetes_validate.utils.InvalidSchemaError) as e:
                r.check(name, False, e.message)


def prom_duration_ms(text: str) -> int:
    """A Prometheus duration (30s, 1m30s, 500ms) in milliseconds."""
    if not crd_schemas.PROM_DURATION.match(text):
        raise ValueError(f"not a Prometheus duration: {text!r}")
    units = {"y": 365 * 86400_000, "w": 7 * 86400_000, "d": 86400_000, "h": 3600_000,
             "m": 60_000, "s": 1000, "ms": 1}
    return sum(int(n) * units[u] for n, u in re.findall(r"([0-9]+)(ms|y|w|d|h|m|s)", text))


def check_crd_schema(r: Report, doc: dict, schema: dict) -> None:
    """kubernetes-validate knows no CRD: a custom resource against its structural schema."""
    name = f"{doc['kind']}/{doc['metadata']['name']} valid for {doc['apiVersion']} (structural, strict)"
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(doc), key=str)
    r.check(name, not errors, "; ".join(
        f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}" for e in errors[:5]))
    if errors:
        return
    for i, ep in enumerate(doc["spec"].get("endpoints", [])):
        if "interval" in ep and "scrapeTimeout" in ep:
            r.check(f"endpoint {i}: 0 < scrapeTimeout <= interval (Prometheus refuses a longer timeout)",
                    0 < prom_duration_ms(ep["scrapeTimeout"]) <= prom_duration_ms(ep["interval"]),
                    f"{ep['scrapeTimeout']} vs {ep['interval']}")


def check_production_objects(r: Report, merged: dict, kinds: dict, docs: list[dict], dep: dict, pod: dict,
                             exported: set[str], postgres: bool) -> None:
    """ServiceAccount, topology spread, routes, autoscaler, disruption budget, network policy,
    alert rules and dashboard (the last five in helm/check_objects.py)."""
    labels = dep["spec"]["selector"]["matchLabels"]
    spec = pod["spec"]
    sa = kinds.get("ServiceAccount")
    if merged["serviceAccount"]["create"]:
        r.check("pods run as the chart's ServiceAccount, which mounts no API token",
                sa is not None and spec.get("serviceAccountName") == sa["metadata"]["name"]
                and sa.get("automountServiceAccountToken") is False
                and spec.get("automountServiceAccountToken") is False)
    spread = spec.get("topologySpreadConstraints", [])
    if merged["topologySpread"]["enabled"]:
        r.check("pods spread over hostnames and zones, selecting their own labels",
                {c["topologyKey"] for c in spread} == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
                and all(c["labelSelector"]["matchLabels"] == labels for c in spread))
    netpol = kinds.get("NetworkPolicy")
    if merged["networkPolicy"]["enabled"]:
        m = merged["metrics"]
        rules = netpol["spec"].get("ingress", []) if netpol else []
        ports = [[p["port"] for p in rule.get("ports", [])] for rule in rules]
        want = [[merged["containerPort"]] + ([m["port"]] if m["enabled"] else [])]
        custom = merged["networkPolicy"]["from"]
        if custom:
            want.append([merged["containerPort"]])
        scrapers = merged["networkPolicy"]["metricsFrom"] if m["enabled"] else []
        if scrapers:
            want.append([m["port"]])
        r.check("the NetworkPolicy admits only the server (and metrics) port, for its own pods",
                netpol is not None and netpol["spec"]["podSelector"]["matchLabels"] == labels
                and ports == want, f"ports by rule {ports}, want {want}")
        if custom:
            r.check("with networkPolicy.from set, the release's own pods still reach each other "
                    "(forwarding to a session's owner)",
                    len(rules) >= 2 and rules[0]["from"] == custom
                    and rules[1]["from"] == [{"podSelector": {"matchLabels": labels}}],
                    f"rules {rules}")
        if scrapers:
            r.check("networkPolicy.metricsFrom peers reach the metrics port only",
                    rules[-1]["from"] == scrapers)
    redis = bool(merged["redis"]["url"] or merged["redis"]["existingSecret"])
    check_objects.check_egress(r, merged, netpol, labels, postgres, redis)
    check_objects.check_routes(r, merged, docs, kinds["Service"])
    check_objects.check_autoscaling(r, merged, docs, dep, exported)
    check_objects.check_disruption_budget(r, merged, docs, labels)
    runbooks = ROOT / "docs" / "observability.md"
    check_objects.check_prometheus_rule(r, merged, docs, exported,
                                        runbooks.read_text() if runbooks.is_file() else None)
    check_objects.check_dashboard(r, merged, docs, exported)


def check_chart_promises(r: Report, values: dict, chart, rendered: dict,
                         docs: list[dict], exported: set[str]) -> dict:
    """The chart-specific assertions; returns what the boot check needs."""
    merged = chart.merge_values(values)
    storage, persistence, admin = merged["storage"], merged["persistence"], merged["admin"]
    postgres = bool(storage["databaseUrl"] or storage["existingSecret"])
    redis = merged["redis"]
    auth = merged["auth"]
    chart_secret = bool(admin["token"] or storage["databaseUrl"] or redis["url"]
                        or auth["sealingKeys"])
    pvc_wanted = not postgres and persistence["enabled"] and not persistence["existingClaim"]
    release_docs = [d for d in docs if not is_hook(d)]
    hook_docs = [d for d in docs if is_hook(d) and "test" not in d["metadata"]["annotations"][HOOK].split(",")]
    test_docs = [d for d in docs if is_hook(d) and d not in hook_docs]
    # The release's main object of each kind (the admin routes and the dashboard are extra ones).
    kinds = by_kind([d for d in release_docs if not check_objects.is_admin(d)
                     and not d["metadata"]["name"].endswith("-dashboard")])
    a, ing, route, m = merged["autoscaling"], merged["ingress"], merged["httpRoute"], merged["metrics"]
    many = a["enabled"] or merged["replicaCount"] > 1
    want = ["ConfigMap", "Deployment", "Service"] + ["Ingress"] * (ing["enabled"] + ing["admin"]["enabled"])
    want += ["HTTPRoute"] * (route["enabled"] + route["admin"]["enabled"])
    want += ["Secret"] * chart_secret + ["PersistentVolumeClaim"] * pvc_wanted
    want += ["ServiceAccount"] * merged["serviceAccount"]["create"]
    want += [{"hpa": "HorizontalPodAutoscaler", "keda": "ScaledObject"}[a["provider"]]] * a["enabled"]
    want += ["PodDisruptionBudget"] * (many and merged["podDisruptionBudget"]["enabled"])
    want += ["NetworkPolicy"] * merged["networkPolicy"]["enabled"]
    want += ["ServiceMonitor"] * m["serviceMonitor"]["enabled"] + ["PrometheusRule"] * m["prometheusRule"]["enabled"]
    want += ["ConfigMap"] * m["dashboard"]["enabled"]
    r.check(f"renders exactly {sorted(want)} (besides hooks)",
            sorted(d["kind"] for d in release_docs) == sorted(want),
            f"got {sorted(d['kind'] for d in release_docs)}")
    want_hooks = ((["ConfigMap", "Job"] + ["Secret"] * chart_secret
                   + ["ServiceAccount"] * merged["serviceAccount"]["create"]) if postgres else [])
    r.check(f"hooks: exactly {sorted(want_hooks) or 'none'} (and the helm test Pod)",
            sorted(d["kind"] for d in hook_docs) == sorted(want_hooks),
            f"got {[d['kind'] for d in hook_docs]}")
    cm, dep, svc = kinds.get("ConfigMap"), kinds.get("Deployment"), kinds.get("Service")
    if not (cm and dep and svc):
        return {}
    pod = dep["spec"]["template"]
    container = next(c for c in pod["spec"]["containers"] if c["name"] == "mcp-harbor")
    release_secrets = {d["metadata"]["name"]: secret_data(d) for d in release_docs if d["kind"] == "Secret"}
    env = r.run("every env secretKeyRef names a chart-managed or pre-existing Secret key",
                lambda: resolve_env(container, release_secrets | EXISTING_SECRETS))
    if env is None:
        return {}
    refs = secret_refs(container)
    check_production_objects(r, merged, kinds, release_docs, dep, pod, exported, postgres)
    check_helm_test(r, merged, test_docs, svc, container)
    check_extension_points(r, merged, dep, pod, container, svc)

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
    annotations = pod["metadata"].get("annotations", {})
    want_sum = hashlib.sha256(rendered[f"{chart.name}/templates/configmap.yaml"].encode()).hexdigest()
    r.check("checksum/config annotation is the ConfigMap's sha256",
            annotations.get("checksum/config") == want_sum)

    # Listening, probes, ports.
    ipv6 = merged["ipFamily"] == "IPv6"
    want_host = "::" if ipv6 else "0.0.0.0"
    r.check(f"MCP_HARBOR__SERVER__HOST={want_host} (ipFamily {merged['ipFamily']})",
            env.get("MCP_HARBOR__SERVER__HOST") == want_host)
    ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    r.check("container port matches MCP_HARBOR__SERVER__PORT",
            str(ports.get("http")) == env.get("MCP_HARBOR__SERVER__PORT"), f"{ports} vs {env}")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container.get(probe, {}).get("httpGet", {})
        r.check(f"{probe} GET {path} on a named container port",
                get.get("path") == path and get.get("port") in ports, str(get))

    # Replicas: each pod a named replica reachable at its IP; Redis when there is more than one.
    r.check("MCP_HARBOR__CLUSTER__REPLICA_ID is the pod name",
            env.get("MCP_HARBOR__CLUSTER__REPLICA_ID") == POD_FIELDS["metadata.name"])
    raw_env = {e["name"]: e.get("value") for e in container.get("env", [])}
    want_url = f"http://[$(POD_IP)]:{merged['containerPort']}" if ipv6 else f"http://$(POD_IP):{merged['containerPort']}"
    r.check(f"MCP_HARBOR__CLUSTER__ADVERTISE_URL is {want_url} (an IPv6 pod IP in brackets)",
            raw_env.get("MCP_HARBOR__CLUSTER__ADVERTISE_URL") == want_url
            and raw_env.get("POD_IP") is None, f"got {raw_env.get('MCP_HARBOR__CLUSTER__ADVERTISE_URL')}")
    r.check("drain grace from drainGraceSeconds, pod grace covers preStop + drain + 10 s",
            env.get("MCP_HARBOR__CLUSTER__DRAIN_GRACE_SECS") == str(merged["drainGraceSeconds"])
            and pod["spec"].get("terminationGracePeriodSeconds")
            == merged["drainGraceSeconds"] + merged["preStopSleepSeconds"] + 10)
    pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    r.check("preStop sleeps preStopSleepSeconds (load balancers let go before the drain)",
            pre_stop == merged["preStopSleepSeconds"])
    m = merged["metrics"]
    metrics_ports = [p for p in container.get("ports", []) if p["name"] == "metrics"]
    if m["enabled"]:
        r.check("metrics on their own port: env, container port and Service port",
                env.get("MCP_HARBOR__METRICS__LISTEN") == f"{'[::]' if ipv6 else '0.0.0.0'}:{m['port']}"
                and [p["containerPort"] for p in metrics_ports] == [m["port"]]
                and any(p["name"] == "metrics" and p["port"] == m["port"]
                        for p in svc["spec"]["ports"]))
    else:
        r.check("no metrics listener unless metrics.enabled",
                "MCP_HARBOR__METRICS__LISTEN" not in env and not metrics_ports)
    if redis["url"] or redis["existingSecret"]:
        want_ref = ((redis["existingSecret"], redis["urlKey"]) if redis["existingSecret"]
                    else (dep["metadata"]["name"], "redis-url"))
        r.check(f"MCP_HARBOR__REDIS__URL from secretKeyRef {want_ref}",
                refs.get("MCP_HARBOR__REDIS__URL") == want_ref, f"got {refs.get('MCP_HARBOR__REDIS__URL')}")
        r.check("MCP_HARBOR__REDIS__KEY_PREFIX from redis.keyPrefix",
                env.get("MCP_HARBOR__REDIS__KEY_PREFIX") == redis["keyPrefix"])
    else:
        r.check("no MCP_HARBOR__REDIS__URL without Redis", "MCP_HARBOR__REDIS__URL" not in env)
    if merged["replicaCount"] > 1:
        r.check("more than one replica only with PostgreSQL and Redis",
                postgres and bool(redis["url"] or redis["existingSecret"]))
        r.check("more than one replica only with shared sealing keys",
                bool(auth["sealingKeys"] or auth["existingSecret"]))
    if auth["sealingKeys"] or auth["existingSecret"]:
        want_ref = ((auth["existingSecret"], auth["sealingKeysKey"]) if auth["existingSecret"]
                    else (dep["metadata"]["name"], "sealing-keys"))
        r.check(f"MCP_HARBOR__AUTH__SEALING_KEYS from secretKeyRef {want_ref}",
                refs.get("MCP_HARBOR__AUTH__SEALING_KEYS") == want_ref,
                f"got {refs.get('MCP_HARBOR__AUTH__SEALING_KEYS')}")
    else:
        r.check("no MCP_HARBOR__AUTH__SEALING_KEYS without keys",
                "MCP_HARBOR__AUTH__SEALING_KEYS" not in env and "MCP_HARBOR__AUTH__SEALING_KEYS" not in refs)
    r.check("MCP_HARBOR__AUTH__PUBLIC_URL from auth.publicUrl",
            env.get("MCP_HARBOR__AUTH__PUBLIC_URL", "") == auth["publicUrl"])

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
        want_hosts |= {merged["ingress"]["host"], *merged["ingress"]["extraHosts"]}
    if merged["ingress"]["admin"]["enabled"]:
        want_hosts.add(merged["ingress"]["admin"]["host"])
    for r_ in (merged["httpRoute"], merged["httpRoute"]["admin"]):
        if r_["enabled"]:
            want_hosts |= set(r_["hostnames"])
    r.check("allowed hosts include allowedHosts, the Service names and every Ingress and HTTPRoute host",
            want_hosts <= set(hosts), f"missing {sorted(want_hosts - set(hosts))}")

    # Allowed browser origins: only set when there are some, as the JSON list the server reads.
    origins_env = env.get("MCP_HARBOR__SERVER__ALLOWED_ORIGINS")
    if merged["allowedOrigins"]:
        r.check("MCP_HARBOR__SERVER__ALLOWED_ORIGINS is the JSON list of allowedOrigins",
                origins_env is not None and json.loads(origins_env) == merged["allowedOrigins"],
                f"got {origins_env!r}")
    else:
        r.check("no MCP_HARBOR__SERVER__ALLOWED_ORIGINS without allowedOrigins", origins_env is None)

    # Trusted proxies: exactly the listed ones (never a private range by default).
    proxies_env = env.get("MCP_HARBOR__SERVER__TRUSTED_PROXIES")
    r.check("MCP_HARBOR__SERVER__TRUSTED_PROXIES is trustedProxies, no default ranges",
            (json.loads(proxies_env) if proxies_env is not None else []) == merged["trustedProxies"],
            f"got {proxies_env!r}")
    proxied = merged["ingress"]["enabled"] or merged["httpRoute"]["enabled"]
    notes_text = rendered.get(f"{chart.name}/templates/NOTES.txt", "")
    r.check("NOTES.txt warns when a proxy fronts the pods and trustedProxies is empty",
            ("WARNING: trustedProxies is empty" in notes_text) == (proxied and not merged["trustedProxies"]))

    for extra in merged["extraEnv"]:
        r.check(f"extraEnv {extra['name']} reaches the container",
                env.get(extra["name"]) == extra.get("value", ""))

    if ingress:
        svc_ports = {p["name"] for p in svc["spec"]["ports"]}
        hosts_routed = [rule["host"] for rule in ingress["spec"]["rules"]]
        backends = [p["backend"]["service"] for rule in ingress["spec"]["rules"] for p in rule["http"]["paths"]]
        r.check("Ingress routes its hosts to the Service's http port",
                hosts_routed == list(dict.fromkeys([merged["ingress"]["host"], *merged["ingress"]["extraHosts"]]))
                and all(b["name"] == svc_name and b["port"].get("name") == "http" and "http" in svc_ports for b in backends),
                json.dumps(ingress["spec"]["rules"])[:300])
        rule = ingress["spec"]["rules"][0]
        tls = ingress["spec"].get("tls", [])
        r.check("Ingress TLS covers the host when enabled",
                bool(tls) == merged["ingress"]["tls"]["enabled"]
                and all(rule["host"] in t["hosts"] and t.get("secretName") for t in tls))
        r.check("Ingress keeps the annotations",
                ingress["metadata"].get("annotations", {}) == merged["ingress"]["annotations"])

    notes = rendered.get(f"{chart.name}/templates/NOTES.txt", "")
    secret_values = [v for v in (admin["token"], storage["databaseUrl"], auth["sealingKeys"]) if v]
    r.check("NOTES.txt prints no secret value", not any(v in notes for v in secret_values))
    if chart_secret:
        secret = kinds.get("Secret", {})
        want_sum = hashlib.sha256(rendered[f"{chart.name}/templates/secret.yaml"].encode()).hexdigest()
        r.check("checksum/secret annotation is the chart-managed Secret's sha256 (pods roll on change)",
                annotations.get("checksum/secret") == want_sum)
        want_keys = {k for k, v in (("admin-token", admin["token"]), ("database-url", storage["databaseUrl"]),
                                    ("redis-url", redis["url"]), ("sealing-keys", auth["sealingKeys"])) if v}
        r.check(f"chart-managed Secret holds exactly {sorted(want_keys)}",
                set(secret_data(secret)) == want_keys, f"got {sorted(secret_data(secret))}")
    else:
        r.check("no checksum/secret annotation without a chart-managed Secret",
                "checksum/secret" not in annotations)

    # Storage.
    r.check("MCP_HARBOR__STORAGE__MAX_CONNECTIONS is storage.maxConnections",
            env.get("MCP_HARBOR__STORAGE__MAX_CONNECTIONS") == str(storage["maxConnections"]))
    strategy = dep["spec"].get("strategy", {}).get("type", "RollingUpdate")
    data_dir = env.get("MCP_HARBOR__STORAGE__DATA_DIR")
    if postgres:
        want_ref = ((storage["existingSecret"], storage["databaseUrlKey"]) if storage["existingSecret"]
                    else (dep["metadata"]["name"], "database-url"))
        r.check(f"MCP_HARBOR__STORAGE__DATABASE_URL from secretKeyRef {want_ref}",
                refs.get("MCP_HARBOR__STORAGE__DATABASE_URL") == want_ref,
                f"got {refs.get('MCP_HARBOR__STORAGE__DATABASE_URL')}")
        r.check("Deployment: MCP_HARBOR__STORAGE__MIGRATE_ON_START=false (the hook Job migrates)",
                env.get("MCP_HARBOR__STORAGE__MIGRATE_ON_START") == "false")
        r.check("no SQLite data dir or data volume with PostgreSQL",
                data_dir is None and DATA_MOUNT not in mounts.values())
        r.check("NOTES.txt names the migration Job", "-migrate" in notes and "mcp-harbor migrate" in notes)
    else:
        r.check("no MCP_HARBOR__STORAGE__DATABASE_URL: the embedded SQLite file",
                "MCP_HARBOR__STORAGE__DATABASE_URL" not in env)
        r.check(f"MCP_HARBOR__STORAGE__DATA_DIR={DATA_MOUNT}", data_dir == DATA_MOUNT, f"got {data_dir!r}")
        r.check("migrate on start (no Job with SQLite)",
                env.get("MCP_HARBOR__STORAGE__MIGRATE_ON_START") == "true")
        held = mount_of(container, pod["spec"], data_dir or "/")
        mount, volume = held if held else ({}, {})
        r.check("DATA_DIR is on a writable volume mount, not the read-only root filesystem",
                bool(mount) and mount["mountPath"] == DATA_MOUNT and not mount.get("readOnly", False)
                and ("emptyDir" in volume or "persistentVolumeClaim" in volume), f"{mount} {volume}")
        if persistence["enabled"]:
            pvc = kinds.get("PersistentVolumeClaim")
            claim = volume.get("persistentVolumeClaim", {}).get("claimName")
            want_claim = persistence["existingClaim"] or (pvc or {}).get("metadata", {}).get("name")
            r.check("data volume is the PersistentVolumeClaim", claim is not None and claim == want_claim,
                    f"claimName {claim!r}, want {want_claim!r}")
            if pvc:
                spec = pvc["spec"]
                sc = persistence["storageClass"]
                r.check("PVC size, accessModes and storageClass from persistence",
                        spec["resources"]["requests"]["storage"] == persistence["size"]
                        and spec["accessModes"] == persistence["accessModes"]
                        and spec.get("storageClassName") == ("" if sc == "-" else sc or None), json.dumps(spec))
                r.check("PVC keeps persistence.annotations",
                        (pvc["metadata"].get("annotations") or {}) == persistence["annotations"])
            r.check("Recreate strategy: one pod at a time on the SQLite volume", strategy == "Recreate")
            r.check("NOTES.txt names the PVC", bool(want_claim) and want_claim in notes)
        else:
            r.check("data volume is an emptyDir", "emptyDir" in volume, json.dumps(volume))
            r.check("NOTES.txt warns that the emptyDir loses the database", "emptyDir" in notes
                    and "persistence.enabled=true" in notes)
        r.check("NOTES.txt says embedded SQLite needs replicaCount 1", "replicaCount at 1" in notes)

    # Admin token.
    token_ref = refs.get("MCP_HARBOR__ADMIN__TOKEN")
    if admin["existingSecret"] or admin["token"]:
        want_ref = ((admin["existingSecret"], admin["tokenKey"]) if admin["existingSecret"]
                    else (dep["metadata"]["name"], "admin-token"))
        r.check(f"MCP_HARBOR__ADMIN__TOKEN from secretKeyRef {want_ref}", token_ref == want_ref,
                f"got {token_ref}")
        r.check("the admin token resolves to the configured one",
                env.get("MCP_HARBOR__ADMIN__TOKEN") == (admin["token"] or ADMIN_TOKEN))
        r.check("NOTES.txt says where the admin token is", want_ref[0] in notes)
    else:
        r.check("no MCP_HARBOR__ADMIN__TOKEN without a configured token",
                "MCP_HARBOR__ADMIN__TOKEN" not in env)
        r.check("NOTES.txt says the generated token is printed in the pod log",
                "generated the admin API token" in notes and "kubectl" in notes)
    want_loopback = "true" if admin["allowHttpLoopbackWebhooks"] else "false"
    r.check(f"MCP_HARBOR__ADMIN__ALLOW_HTTP_LOOPBACK_WEBHOOKS={want_loopback}",
            env.get("MCP_HARBOR__ADMIN__ALLOW_HTTP_LOOPBACK_WEBHOOKS") == want_loopback)
    if admin["allowHttpLoopbackWebhooks"]:
        r.check("NOTES.txt warns about allowHttpLoopbackWebhooks", "allowHttpLoopbackWebhooks" in notes)

    check_telemetry(r, merged, container, env, refs, config or {}, notes, docs)
    if merged["metrics"]["serviceMonitor"]["enabled"]:
        check_service_monitor(r, merged, kinds, svc, container)

    job_env = check_migration_job(r, merged, hook_docs, dep, container, env, svc, cm) if postgres else None
    return {"config_text": config_text, "config": config or {}, "env": env, "hosts": hosts,
            "origins": merged["allowedOrigins"],
            "container": container, "pod_spec": pod["spec"], "configmaps": {cm["metadata"]["name"]: cm},
            "job_env": job_env, "postgres": postgres,
            "admin_token": env.get("MCP_HARBOR__ADMIN__TOKEN"),
            "persistent": not postgres and persistence["enabled"],
            "metrics": merged["metrics"]["enabled"], "telemetry": merged["telemetry"],
            "log_format": effective_log_format(env, config or {})}


def check_helm_test(r: Report, merged: dict, tests: list[dict], svc: dict, container: dict) -> None:
    """`helm test`: one Pod running the release's image to probe the Service."""
    if not r.check("one helm test Pod", len(tests) == 1 and tests[0]["kind"] == "Pod", str(len(tests))):
        return
    spec = tests[0]["spec"]
    (probe,) = spec["containers"]
    url = f"http://{svc['metadata']['name']}.{NAMESPACE}.svc:{merged['service']['port']}"
    r.check(f"helm test runs `mcp-harbor healthcheck --url {url}` from the release's image, once",
            probe["image"] == container["image"] and probe.get("args") == ["healthcheck", "--url", url]
            and spec.get("restartPolicy") == "Never" and spec.get("automountServiceAccountToken") is False)


def check_extension_points(r: Report, merged: dict, dep: dict, pod: dict, container: dict, svc: dict) -> None:
    """extraEnvFrom, extraVolumes and mounts, initContainers, sidecars, priorityClassName,
    podLabels, the startup probe, the image digest and Service annotations reach their objects."""
    spec = pod["spec"]
    names = [c["name"] for c in spec["containers"]]
    r.check("the server container first, then the sidecars",
            names == ["mcp-harbor"] + [s["name"] for s in merged["sidecars"]], str(names))
    r.check("initContainers as given", spec.get("initContainers", []) == merged["initContainers"])
    r.check("extraEnvFrom as the container's envFrom", container.get("envFrom", []) == merged["extraEnvFrom"])
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    r.check("extraVolumes in the pod, extraVolumeMounts in the server container",
            all(volumes.get(v["name"]) == v for v in merged["extraVolumes"])
            and all(m in container.get("volumeMounts", []) for m in merged["extraVolumeMounts"]))
    r.check("priorityClassName on the pod only when set",
            spec.get("priorityClassName") == (merged["priorityClassName"] or None))
    labels = pod["metadata"]["labels"]
    r.check("podLabels on the pods, not in the Deployment's selector",
            merged["podLabels"].items() <= labels.items()
            and not set(merged["podLabels"]) & set(dep["spec"]["selector"]["matchLabels"]))
    startup = container.get("startupProbe")
    s = merged["startupProbe"]
    r.check("a startup probe on /healthz (liveness waits for it) when enabled",
            (startup is not None) == s["enabled"] and (not startup or (
                startup["httpGet"]["path"] == "/healthz" and startup["periodSeconds"] == s["periodSeconds"]
                and startup["failureThreshold"] == s["failureThreshold"])), json.dumps(startup))
    image = merged["image"]
    want = f"{image['repository']}:{image['tag'] or '0.1.0'}" + (f"@{image['digest']}" if image["digest"] else "")
    r.check(f"image {want}", container["image"] == want, container["image"])
    r.check("service.annotations on the Service",
            (svc["metadata"].get("annotations") or {}) == merged["service"]["annotations"])
    mounts = {m["name"]: m for m in container.get("volumeMounts", [])}
    for store, secret, path in (("redis", merged["redis"]["tls"]["secretName"], "/etc/mcp-harbor/redis-tls"),
                                ("postgres", merged["storage"]["tls"]["secretName"], "/etc/mcp-harbor/postgres-tls")):
        if secret:
            volume = volumes.get(f"{store}-tls", {})
            r.check(f"{store} TLS Secret {secret} mounted read-only at {path}",
                    volume.get("secret", {}).get("secretName") == secret
                    and mounts.get(f"{store}-tls", {}).get("mountPath") == path
                    and mounts[f"{store}-tls"].get("readOnly") is True)
    tls = merged["redis"]["tls"]
    if tls["secretName"]:
        raw = {e["name"]: e.get("value") for e in container.get("env", [])}
        want_env = {f"MCP_HARBOR__REDIS__TLS_{k}_PATH": f"/etc/mcp-harbor/redis-tls/{v}"
                    for k, v in (("CA", tls["caKey"]), ("CERT", tls["certKey"]), ("KEY", tls["keyKey"])) if v}
        r.check("MCP_HARBOR__REDIS__TLS_{CA,CERT,KEY}_PATH name the mounted files",
                {k: raw.get(k) for k in want_env} == want_env, str(want_env))


def effective_log_format(env: dict[str, str], config: dict) -> str:
    """What the server logs in: the env var wins over [log] format, whose default is plain."""
    return env.get("MCP_HARBOR__LOG__FORMAT") or config.get("log", {}).get("format", "plain")


def check_telemetry(r: Report, merged: dict, container: dict, env: dict[str, str],
                    refs: dict[str, tuple[str, str]], config: dict, notes: str, docs: list[dict]) -> None:
    """OpenTelemetry env vars only with an endpoint; headers only from a Secret; the pod's
    identity as resource attributes through the downward API; the log format."""
    t = merged["telemetry"]
    otlp = t["otlp"]
    raw = {e["name"]: e for e in container.get("env", [])}
    if t["logFormat"]:
        r.check(f"MCP_HARBOR__LOG__FORMAT={t['logFormat']} from telemetry.logFormat",
                env.get("MCP_HARBOR__LOG__FORMAT") == t["logFormat"])
    else:
        r.check("no MCP_HARBOR__LOG__FORMAT without telemetry.logFormat ([log] in config decides)",
                "MCP_HARBOR__LOG__FORMAT" not in env)
    fmt = effective_log_format(env, config)
    r.check(f"the server logs {fmt}, and NOTES.txt says whether lines are JSON",
            fmt in ("plain", "json") and (("JSON lines" in notes) == (fmt == "json")))
    # No OTLP header value anywhere but in a Secret the Deployment reads through a secretKeyRef.
    header_vars = [n for n in raw if n.startswith("OTEL_EXPORTER_OTLP") and "HEADERS" in n]
    r.check("OTLP headers only through secretKeyRefs, never inline",
            all("secretKeyRef" in raw[n].get("valueFrom", {}) for n in header_vars)
            and "otlp_headers" not in config.get("telemetry", {})
            and not any(OTLP_HEADERS in json.dumps(d) for d in docs),
            f"header variables {header_vars}")
    if not otlp["endpoint"]:
        present = [n for n in TELEMETRY_ENV if n in env]
        r.check("no OpenTelemetry variables without telemetry.otlp.endpoint", not present, str(present))
        r.check("NOTES.txt says OpenTelemetry export is off", "OpenTelemetry export is off" in notes)
        return
    want = {"MCP_HARBOR__TELEMETRY__OTLP_ENDPOINT": otlp["endpoint"],
            "MCP_HARBOR__TELEMETRY__OTLP_PROTOCOL": otlp["protocol"],
            "MCP_HARBOR__TELEMETRY__METRICS_INTERVAL_MS": str(t["metricsIntervalMs"]),
            "MCP_HARBOR__TELEMETRY__SERVICE_NAME": t["serviceName"],
            "MCP_HARBOR__TELEMETRY__TRACES": str(t["traces"]).lower(),
            "MCP_HARBOR__TELEMETRY__METRICS": str(t["metrics"]).lower()}
    for name, value in want.items():
        r.check(f"{name}={value}", env.get(name) == value and "value" in raw.get(name, {}),
                f"got {env.get(name)!r}")
    ratio = env.get("MCP_HARBOR__TELEMETRY__SAMPLING_RATIO", "")
    r.check(f"MCP_HARBOR__TELEMETRY__SAMPLING_RATIO={ratio}: samplingRatio {t['samplingRatio']} in "
            "fixed point (the server reads 1e-05 as a string)",
            re.fullmatch(r"[0-9]+(\.[0-9]+)?", ratio) is not None
            and abs(float(ratio) - t["samplingRatio"]) < 1e-12, f"got {ratio!r}")
    secret = otlp["headersSecret"]
    if secret["name"]:
        want_ref = (secret["name"], secret["key"])
        r.check(f"OTEL_EXPORTER_OTLP_HEADERS from secretKeyRef {want_ref}",
                refs.get("OTEL_EXPORTER_OTLP_HEADERS") == want_ref
                and env.get("OTEL_EXPORTER_OTLP_HEADERS") == OTLP_HEADERS,
                f"got {refs.get('OTEL_EXPORTER_OTLP_HEADERS')}")
        r.check("NOTES.txt names the headers Secret, not its value",
                secret["name"] in notes and OTLP_HEADERS not in notes)
    else:
        r.check("no OTEL_EXPORTER_OTLP_HEADERS without telemetry.otlp.headersSecret.name",
                "OTEL_EXPORTER_OTLP_HEADERS" not in env)
    # OTEL_RESOURCE_ATTRIBUTES: $(VAR) references to downward-API variables defined before it.
    attrs_raw = raw.get("OTEL_RESOURCE_ATTRIBUTES", {}).get("value", "")
    refs_in = dict(kv.split("=", 1) for kv in attrs_raw.split(",") if "=" in kv)
    want_fields = {"k8s.pod.name": "metadata.name", "k8s.namespace.name": "metadata.namespace",
                   "k8s.node.name": "spec.nodeName"}
    names = [e["name"] for e in container.get("env", [])]

    def from_downward(attr: str, field: str) -> bool:
        m = re.fullmatch(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", refs_in.get(attr, ""))
        if not m or m.group(1) not in raw:
            return False
        var = raw[m.group(1)]
        return (var.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == field
                and names.index(m.group(1)) < names.index("OTEL_RESOURCE_ATTRIBUTES"))
    r.check("OTEL_RESOURCE_ATTRIBUTES takes k8s.pod.name, k8s.namespace.name and k8s.node.name from "
            "the downward API ($(VAR) of fieldRef variables defined before it)",
            all(from_downward(a, f) for a, f in want_fields.items()), attrs_raw)
    resolved = dict(kv.split("=", 1) for kv in env.get("OTEL_RESOURCE_ATTRIBUTES", "").split(",") if "=" in kv)
    r.check("OTEL_RESOURCE_ATTRIBUTES resolves to the pod's name, namespace and node",
            all(resolved.get(a) == POD_FIELDS[f] for a, f in want_fields.items()), str(resolved))
    r.check("service.instance.id (the replica id) is the pod name too",
            env.get("MCP_HARBOR__CLUSTER__REPLICA_ID") == resolved.get("k8s.pod.name"))
    r.check("NOTES.txt says where traces go", otlp["endpoint"] in notes and "OpenTelemetry" in notes)


def check_service_monitor(r: Report, merged: dict, kinds: dict, svc: dict, container: dict) -> None:
    """The ServiceMonitor scrapes this release's Service on its "metrics" port."""
    sm, want = kinds.get("ServiceMonitor"), merged["metrics"]["serviceMonitor"]
    if not r.check("a ServiceMonitor is rendered", sm is not None):
        return
    spec = sm["spec"]
    match = spec["selector"].get("matchLabels", {})
    r.check("ServiceMonitor selects the Service's labels (the stable selector labels only)",
            bool(match) and match.items() <= svc["metadata"]["labels"].items()
            and match == svc["spec"]["selector"] and not spec["selector"].get("matchExpressions"),
            json.dumps(spec["selector"]))
    r.check("ServiceMonitor looks in the release's namespace only",
            spec.get("namespaceSelector") == {"matchNames": [NAMESPACE]})
    (ep,) = spec["endpoints"]
    svc_port = next((p for p in svc["spec"]["ports"] if p["name"] == ep.get("port")), None)
    container_ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    r.check('ServiceMonitor scrapes the Service port "metrics" (the container\'s metrics port)',
            ep.get("port") == "metrics" and svc_port is not None
            and container_ports.get(svc_port["targetPort"]) == merged["metrics"]["port"], json.dumps(ep))
    r.check("ServiceMonitor path /metrics over http, interval and scrapeTimeout from values",
            ep.get("path") == "/metrics" and ep.get("scheme", "http") == "http"
            and ep.get("interval") == want["interval"] and ep.get("scrapeTimeout") == want["scrapeTimeout"],
            json.dumps(ep))
    r.check("ServiceMonitor carries metrics.serviceMonitor.labels (for the operator's selector)",
            want["labels"].items() <= (sm["metadata"].get("labels") or {}).items())


def check_migration_job(r: Report, merged: dict, hooks: list[dict], dep: dict, container: dict,
                        env: dict[str, str], svc: dict, cm: dict) -> dict[str, str] | None:
    """The pre-install/pre-upgrade Job: `migrate` with the Deployment's env, runnable before install."""
    jobs = [d for d in hooks if d["kind"] == "Job"]
    if not r.check("one migration Job", len(jobs) == 1, f"got {len(jobs)}"):
        return None
    job = jobs[0]
    ann = job["metadata"].get("annotations", {})
    r.check("Job hook: pre-install,pre-upgrade",
            set(ann.get(HOOK, "").split(",")) == {"pre-install", "pre-upgrade"}, ann.get(HOOK, ""))
    r.check("Job hook-delete-policy: before-hook-creation,hook-succeeded",
            set(ann.get(HOOK_DELETE, "").split(",")) == {"before-hook-creation", "hook-succeeded"},
            ann.get(HOOK_DELETE, ""))
    pod = job["spec"]["template"]
    (jc,) = pod["spec"]["containers"]
    r.check("Job runs `mcp-harbor migrate` from the Deployment's image",
            jc.get("args") == ["migrate"] and "command" not in jc and jc["image"] == container["image"],
            f"args {jc.get('args')}, image {jc['image']}")
    r.check("Job pod: restartPolicy Never, non-root, read-only root filesystem",
            pod["spec"].get("restartPolicy") == "Never"
            and pod["spec"].get("securityContext") == dep["spec"]["template"]["spec"].get("securityContext")
            and jc.get("securityContext") == container.get("securityContext"))
    sa_name = pod["spec"].get("serviceAccountName")
    if merged["serviceAccount"]["create"]:
        copies = [d for d in hooks if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == sa_name]
        annotations = copies[0]["metadata"]["annotations"] if copies else {}
        r.check("Job runs as the hook copy of the chart's ServiceAccount (same annotations, no token)",
                len(copies) == 1 and copies[0].get("automountServiceAccountToken") is False
                and merged["serviceAccount"]["annotations"].items() <= annotations.items(), str(sa_name))
    else:
        r.check("Job runs as the configured ServiceAccount, like the pods",
                sa_name == dep["spec"]["template"]["spec"].get("serviceAccountName") == (
                    merged["serviceAccount"]["name"] or "default"), str(sa_name))
    r.check("Job pod annotations are migration.podAnnotations",
            (pod["metadata"].get("annotations") or {}) == merged["migration"]["podAnnotations"])
    selector = svc["spec"]["selector"]
    r.check("the Service does not select the Job's pod",
            not selector.items() <= pod["metadata"].get("labels", {}).items())

    # Everything the Job reads exists before it: pre-existing Secrets, or hooks of the same events
    # with a lower weight (pre-install runs before the release's own ConfigMap and Secret exist).
    weight = int(ann.get(HOOK_WEIGHT, "0"))
    earlier = {(d["kind"], d["metadata"]["name"]): d for d in hooks
               if d is not job and set(d["metadata"]["annotations"][HOOK].split(",")) >= {"pre-install", "pre-upgrade"}
               and int(d["metadata"]["annotations"].get(HOOK_WEIGHT, "0")) < weight}
    for d in earlier.values():
        policy = set(d["metadata"]["annotations"].get(HOOK_DELETE, "").split(","))
        r.check(f"hook {d['kind']}/{d['metadata']['name']}: before-hook-creation,hook-succeeded",
                policy == {"before-hook-creation", "hook-succeeded"}, str(policy))
    refs = secret_refs(jc)
    dangling = [f"{n}: {s}/{k}" for n, (s, k) in refs.items()
                if s not in EXISTING_SECRETS and ("Secret", s) not in earlier]
    r.check("Job secretKeyRefs name pre-existing Secrets or earlier hook Secrets", not dangling,
            "; ".join(dangling))
    hook_cms = {v["name"]: v["configMap"]["name"] for v in pod["spec"].get("volumes", []) if "configMap" in v}
    r.check("Job's config volume is an earlier hook ConfigMap with the release's config.toml",
            bool(hook_cms) and all(("ConfigMap", n) in earlier
                                   and earlier[("ConfigMap", n)]["data"] == cm["data"] for n in hook_cms.values()),
            str(hook_cms))
    mounts = {m["name"]: m["mountPath"] for m in jc.get("volumeMounts", [])}
    hook_secrets = {name: secret_data(d) for (kind, name), d in earlier.items() if kind == "Secret"}
    job_env = r.run("Job env secretKeyRefs resolve", lambda: resolve_env(jc, hook_secrets | EXISTING_SECRETS))
    if job_env is None:
        return None
    r.check("Job mounts its config where MCP_HARBOR_CONFIG points",
            any(job_env.get("MCP_HARBOR_CONFIG") == f"{mounts.get(v)}/config.toml" for v in hook_cms))
    names = [e["name"] for e in jc.get("env", [])]
    r.check("Job env: the Deployment's variables, in the same order",
            names == [e["name"] for e in container.get("env", [])])
    differ = sorted(k for k in env.keys() | job_env.keys() if env.get(k) != job_env.get(k))
    r.check("Job env: the Deployment's values (same Secret contents), except MIGRATE_ON_START=true",
            differ == ["MCP_HARBOR__STORAGE__MIGRATE_ON_START"]
            and job_env["MCP_HARBOR__STORAGE__MIGRATE_ON_START"] == "true", f"differ: {differ}")
    kept = {n: ref for n, ref in refs.items() if ref[0] in EXISTING_SECRETS}
    r.check("Job and Deployment read pre-existing Secrets through the same secretKeyRefs",
            all(secret_refs(container).get(n) == ref for n, ref in kept.items()))
    return job_env


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


def http_get(port: int, path: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
        response = conn.getresponse()
        return response.status, response.read().decode(errors="replace")
    finally:
        conn.close()


def http_status(port: int, method: str, path: str, host: str, body: dict | None = None,
                token: str | None = None, extra: dict[str, str] | None = None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    headers = {"Host": host} | (extra or {})
    if body is not None:
        headers |= {"Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn.request(method, path, json.dumps(body) if body is not None else None, headers)
        return conn.getresponse().status
    finally:
        conn.close()


class Postgres:
    """Fresh databases on a reachable PostgreSQL server, created and dropped with psql."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.why_not = self._probe()

    def _psql(self, sql: str) -> subprocess.CompletedProcess:
        return subprocess.run(["psql", f"{self.base_url}/postgres", "-v", "ON_ERROR_STOP=1", "-qAtc", sql],
                              capture_output=True, text=True, timeout=30,
                              env=os.environ | {"PGCONNECT_TIMEOUT": "3"})

    def _probe(self) -> str | None:
        if shutil.which("psql") is None:
            return "psql is not installed"
        try:
            done = self._psql("SELECT 1")
        except subprocess.TimeoutExpired:
            return f"{self.base_url} did not answer"
        return None if done.returncode == 0 else f"{self.base_url}: {' '.join(done.stderr.split())}"

    def create(self, name: str) -> str:
        done = self._psql(f'CREATE DATABASE "{name}"')
        if done.returncode:
            raise RuntimeError(done.stderr.strip())
        return f"{self.base_url}/{name}"

    def drop(self, name: str) -> None:
        self._psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def has_subcommand(binary: Path, name: str) -> bool:
    done = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=10)
    return re.search(rf"^\s+{re.escape(name)}\s", done.stdout, re.M) is not None


class Server:
    """The binary serving on a free loopback port, stopped on exit."""

    def __init__(self, binary: Path, env: dict[str, str], log: Path) -> None:
        self.binary, self.port, self.log = binary, free_port(), log
        self.env = env | {"MCP_HARBOR__SERVER__HOST": "127.0.0.1",
                          "MCP_HARBOR__SERVER__PORT": str(self.port)}
        # The metrics listener (0.0.0.0:<metrics.port> in the pod) on a free loopback port.
        self.metrics_port = None
        if "MCP_HARBOR__METRICS__LISTEN" in env:
            self.metrics_port = free_port()
            self.env["MCP_HARBOR__METRICS__LISTEN"] = f"127.0.0.1:{self.metrics_port}"

    def __enter__(self) -> "Server":
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([str(self.binary), "serve"], env=self.env,
                                         stdout=out, stderr=out)
        self.up = False
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                self.up = http_status(self.port, "GET", "/healthz", f"127.0.0.1:{self.port}") == 200
            except OSError:
                pass
            if self.up:
                break
            time.sleep(0.1)
        return self

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def host_env(facts: dict, tmp: Path, env: dict[str, str]) -> dict[str, str]:
    """The container environment on this machine: every volume mount a directory under tmp
    (ConfigMap volumes filled with their files), paths in the environment remapped to them."""
    remap = {}
    for m in facts["container"].get("volumeMounts", []):
        host = tmp / "volumes" / m["name"]
        host.mkdir(parents=True, exist_ok=True)
        volume = next(v for v in facts["pod_spec"]["volumes"] if v["name"] == m["name"])
        if "configMap" in volume:
            cm = facts["configmaps"][volume["configMap"]["name"]]
            for name, text in cm["data"].items():
                (host / name).write_text(text)
        remap[m["mountPath"].rstrip("/")] = str(host)
    out = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_HARBOR", "OTEL_"))}
    out.pop("RUST_LOG", None)
    for name, value in env.items():
        # Once, by the longest mount path holding it (host paths may themselves be under /tmp).
        held = [c for c in remap if value == c or value.startswith(c + "/")]
        if held:
            container_path = max(held, key=len)
            value = remap[container_path] + value[len(container_path):]
        out[name] = value
    return out | {"MCP_HARBOR__LOG__FILTER": "warn"}


def check_boot(r: Report, binary: Path, facts: dict, pg: Postgres | None, scenario: str) -> None:
    """Run the real server with the rendered config file and container environment."""
    label = binary.relative_to(ROOT) if binary.is_relative_to(ROOT) else binary
    db_name = None
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        env = host_env(facts, tmp, facts["env"])
        job_env = host_env(facts, tmp, facts["job_env"]) if facts.get("job_env") else None
        try:
            if facts["postgres"]:
                if pg is None or pg.why_not:
                    print(f"  skip  boot check: no PostgreSQL ({pg.why_not if pg else '--no-postgres'})")
                    return
                db_name = f"mcp_harbor_helm_check_{os.getpid()}_{scenario.replace('-', '_')}"
                url = r.run(f"fresh database {db_name} (stands for the rendered database URL)",
                            lambda: pg.create(db_name))
                if url is None:
                    db_name = None
                    return
                env["MCP_HARBOR__STORAGE__DATABASE_URL"] = url
                for e in (env, job_env):
                    if e is not None and "MCP_HARBOR__REDIS__URL" in e:
                        e["MCP_HARBOR__REDIS__URL"] = os.environ.get(
                            "MCP_HARBOR_HELM_CHECK_REDIS", "redis://127.0.0.1:6379")
                        e["MCP_HARBOR__REDIS__KEY_PREFIX"] = f"helm-check-{os.getpid()}-{scenario}"
                if job_env is not None:
                    job_env["MCP_HARBOR__STORAGE__DATABASE_URL"] = url
                if has_subcommand(binary, "migrate"):
                    done = subprocess.run([str(binary), "migrate"], env=job_env, capture_output=True,
                                          text=True, timeout=60)
                    r.check("`mcp-harbor migrate` with the Job's env exits 0", done.returncode == 0,
                            (done.stdout + done.stderr).strip()[-2000:])
                else:
                    print(f"  skip  migrate Job run: {label} has no `migrate` subcommand yet; "
                          "booting with MCP_HARBOR__STORAGE__MIGRATE_ON_START=true instead")
                    env["MCP_HARBOR__STORAGE__MIGRATE_ON_START"] = "true"
            boot_once(r, binary, label, facts, env, tmp)
        finally:
            if db_name and pg:
                pg.drop(db_name)


def boot_once(r: Report, binary: Path, label, facts: dict, env: dict[str, str], tmp: Path) -> None:
    with Server(binary, env, tmp / "server.log") as server:
        port = server.port
        if not r.check(f"{label} serves with the rendered config and env", server.up,
                       server.output().strip()[-2000:]):
            return
        # kubelet probes send the pod IP as Host.
        r.check("GET /healthz and /readyz answer 200 to a probe's Host",
                http_status(port, "GET", "/healthz", f"10.0.0.7:{port}") == 200
                and http_status(port, "GET", "/readyz", f"10.0.0.7:{port}") == 200)
        tenants = facts["config"].get("tenants", [{"slug": "demo"}])
        if tenants:
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
            if facts["origins"]:
                host = f"127.0.0.1:{port}"
                statuses = {o: http_status(port, "POST", path, host, init, extra={"Origin": o})
                            for o in facts["origins"]}
                r.check("a page at every allowedOrigins origin may initialize a session",
                        all(s == 200 for s in statuses.values()), str(statuses))
                other = http_status(port, "POST", path, host, init,
                                    extra={"Origin": "https://evil.example.com"})
                r.check("a page at an unlisted origin is refused (403)", other == 403, f"got {other}")

        data_dir = env.get("MCP_HARBOR__STORAGE__DATA_DIR")
        if not facts["postgres"]:
            r.check("the SQLite file is created on the data volume",
                    data_dir is not None and data_dir.startswith(str(tmp / "volumes"))
                    and (Path(data_dir) / "mcp-harbor.db").is_file(), f"DATA_DIR {data_dir}")

        token = facts["admin_token"]
        generated = GENERATED_TOKEN.search(server.output())
        if token:
            r.check("no admin token generated when one is configured", generated is None)
        else:
            r.check("without a configured token, one is generated and printed in the log",
                    generated is not None, server.output().strip()[-1000:])
            token = generated.group(1) if generated else None
        if token:
            host = f"127.0.0.1:{port}"
            statuses = (http_status(port, "GET", "/admin/v1/tenants", host, token=token),
                        http_status(port, "GET", "/admin/v1/tenants", host),
                        http_status(port, "GET", "/admin/v1/tenants", host, token=token + "x"))
            r.check("GET /admin/v1/tenants: 200 with the token, 401 without or with a wrong one",
                    statuses == (200, 401, 401), f"got {statuses}")
        if facts["metrics"]:
            status, body = http_get(server.metrics_port, "/metrics")
            # The MCP operation metrics once a seeded tenant was called above; the server's own
            # gauges without one (production seeds none).
            want = "mcp_server_operation_duration" if tenants else "mcp_harbor_http_connections_open"
            r.check("GET /metrics on the metrics listener: 200, Prometheus text with the MCP metrics",
                    status == 200 and want in body, f"status {status}, want {want}")
        otlp = facts["telemetry"]["otlp"]
        if otlp["endpoint"]:
            r.check(f"OTLP export to {otlp['endpoint']} (unreachable here) starts and does not stop the server",
                    "could not start" not in server.output()
                    and http_status(port, "GET", "/healthz", f"127.0.0.1:{port}") == 200,
                    server.output().strip()[-1000:])
        if facts["log_format"] == "json":
            check_json_logs(r, server.output())
    if facts["telemetry"]["otlp"]["endpoint"] and facts["telemetry"]["otlp"]["protocol"] == "http/protobuf":
        check_otlp_export(r, binary, facts, env, tmp)
    if not facts["admin_token"] and token and not facts["postgres"]:
        # A restart on the same volume (what the PVC, or an emptyDir across container restarts,
        # gives) keeps the database, so the printed token stays valid and no new one is printed.
        with Server(binary, env, tmp / "server-2.log") as again:
            if r.check("restarts on the same data volume", again.up, again.output().strip()[-2000:]):
                status = http_status(again.port, "GET", "/admin/v1/tenants",
                                     f"127.0.0.1:{again.port}", token=token)
                r.check("after a restart: no new token printed, the first one still answers 200",
                        GENERATED_TOKEN.search(again.output()) is None and status == 200,
                        f"status {status}")


def check_json_logs(r: Report, output: str, name: str = "log lines are JSON objects") -> list[dict]:
    """Every line of the log layer is a JSON object with timestamp and level (lines the server
    prints itself, "mcp-harbor: …", are plain by design)."""
    lines, bad = [], []
    for line in output.splitlines():
        if not line.strip() or line.startswith("mcp-harbor: "):
            continue
        try:
            obj = json.loads(line)
            if not (isinstance(obj, dict) and {"timestamp", "level"} <= obj.keys()):
                raise ValueError
            lines.append(obj)
        except ValueError:
            bad.append(line)
    r.check(f"{name} ({len(lines)} lines)", not bad, "; ".join(bad[:3])[:500])
    return lines


class Collector:
    """A stand-in OTLP/HTTP collector on loopback that records every export and answers 200."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        seen = self.requests

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server interface
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> "Collector":
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def bodies(self, path: str) -> list[bytes]:
        return [body for p, _, body in self.requests if p == path]


def check_otlp_export(r: Report, binary: Path, facts: dict, env: dict[str, str], tmp: Path) -> None:
    """The rendered telemetry settings, pointed at a stand-in collector: spans and metrics arrive
    with the Secret's headers and the pod's resource attributes."""
    t = facts["telemetry"]
    trace_id, parent_id = os.urandom(16), os.urandom(8)
    with Collector() as collector:
        run_env = env | {"MCP_HARBOR__TELEMETRY__OTLP_ENDPOINT": collector.url,
                         "MCP_HARBOR__TELEMETRY__METRICS_INTERVAL_MS": "1000",
                         "OTEL_BSP_SCHEDULE_DELAY": "200", "MCP_HARBOR__LOG__FILTER": "info"}
        with Server(binary, run_env, tmp / "server-otlp.log") as server:
            if not r.check(f"boots exporting to a stand-in collector at {collector.url}", server.up,
                           server.output().strip()[-2000:]):
                return
            tenants = facts["config"].get("tenants", [{"slug": "demo"}])
            slug = tenants[0]["slug"] if tenants else "demo"
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                               "clientInfo": {"name": "helm-check", "version": "1"}}}
            # A caller that sampled its trace: followed whatever samplingRatio says (parent-based).
            status = http_status(server.port, "POST", f"/t/{slug}/mcp", f"127.0.0.1:{server.port}", init,
                                 extra={"traceparent": f"00-{trace_id.hex()}-{parent_id.hex()}-01"})
            r.check("initialize with a sampled traceparent: 200", status == 200, f"got {status}")
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not (
                    any(trace_id in b for b in collector.bodies("/v1/traces"))
                    and (collector.bodies("/v1/metrics") or not t["metrics"])):
                time.sleep(0.2)
        output = server.output()  # the server has stopped and flushed
    traces, metrics = collector.bodies("/v1/traces"), collector.bodies("/v1/metrics")
    r.check("spans arrive at <endpoint>/v1/traces as OTLP protobuf",
            bool(traces) and all(h.get("content-type") == "application/x-protobuf"
                                 for p, h, _ in collector.requests),
            f"requests: {[(p, h.get('content-type')) for p, h, _ in collector.requests]}")
    r.check("the caller's trace continues: its trace id, the HTTP and `initialize` MCP spans",
            any(trace_id in b and b"initialize" in b and b"POST /t/{tenant}/mcp" in b for b in traces))
    if t["metrics"]:
        r.check("metrics arrive at <endpoint>/v1/metrics (mcp.server.operation.duration)",
                any(b"mcp.server.operation.duration" in b for b in metrics), f"{len(metrics)} exports")
    else:
        r.check("no metrics exported with telemetry.metrics false", not metrics)
    want_headers = dict(kv.split("=", 1) for kv in env.get("OTEL_EXPORTER_OTLP_HEADERS", "").split(",") if kv)
    if want_headers:
        r.check(f"every export carries the headers from the Secret ({', '.join(want_headers)})",
                bool(collector.requests)
                and all(all(h.get(k) == v for k, v in want_headers.items()) for _, h, _ in collector.requests))
    resource = {"service.name": t["serviceName"], "service.instance.id": POD_FIELDS["metadata.name"],
                "k8s.pod.name": POD_FIELDS["metadata.name"], "k8s.namespace.name": NAMESPACE,
                "k8s.node.name": POD_FIELDS["spec.nodeName"]}
    missing = [f"{k}={v}" for k, v in resource.items()
               if not all(k.encode() in b and v.encode() in b for b in traces + metrics)]
    r.check("every export's resource: service.name, service.instance.id and k8s.* of the pod",
            bool(traces) and not missing, f"missing {missing}")
    if facts["log_format"] == "json":
        lines = check_json_logs(r, output, "log lines are JSON objects (filter info)")
        on = [l for l in lines if l.get("fields", {}).get("message") == "OpenTelemetry export on"]
        r.check("the JSON log says where export goes",
                bool(on) and on[0]["fields"].get("endpoint") == collector.url, str(on[:1]))


def main() -> int:
    latest = kubernetes_validate.utils.latest_version()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kube-version", action="append", dest="kube_versions",
                    help=f"Kubernetes version(s) to validate against (default: {OLDEST_KUBE} and {latest})")
    ap.add_argument("--binary", help="mcp-harbor binary for the boot check "
                    "(default: $MCP_HARBOR_BIN, target/release, target/debug)")
    ap.add_argument("--no-boot", action="store_true", help="skip the boot check")
    ap.add_argument("--postgres", default=os.environ.get("MCP_HARBOR_HELM_CHECK_POSTGRES",
                                                         "postgres://postgres@127.0.0.1:5432"),
                    help="PostgreSQL server for the PostgreSQL scenarios' boot check: a fresh "
                         "database is created and dropped there (default: %(default)s)")
    ap.add_argument("--no-postgres", action="store_true",
                    help="skip booting the PostgreSQL scenarios")
    ap.add_argument("--chart", type=Path, default=CHART, help="chart directory (default: %(default)s)")
    args = ap.parse_args()
    chart_dir = args.chart.resolve()
    kube_versions = args.kube_versions or [OLDEST_KUBE, latest]
    binary = None if args.no_boot else find_binary(args.binary)
    if args.binary and binary is None:
        sys.exit(f"helm/check.py: --binary {args.binary} is not an executable file")
    pg = None if (binary is None or args.no_postgres) else Postgres(args.postgres)

    r = Report()
    print(f"helm-python-sdk {helm.__version__} (Helm SDK {helm.helm_sdk_version()}), "
          f"kubernetes-validate {kubernetes_validate.__version__}; chart {chart_dir}")
    if binary is not None:
        print(f"boot checks with {binary}"
              + ("" if has_subcommand(binary, "migrate") else " (no `migrate` subcommand)")
              + (f"; PostgreSQL {'unavailable: ' + pg.why_not if pg.why_not else 'at ' + pg.base_url}"
                 if pg else "; PostgreSQL scenarios not booted (--no-postgres)"))
    with helm.Chart.load(chart_dir) as chart:
        meta = chart.metadata
        print(f"\n[chart] {meta['name']} {meta['version']} (appVersion {meta.get('appVersion')})")
        r.check("Chart.yaml: apiVersion v2, appVersion 0.1.0",
                meta.get("apiVersion") == "v2" and meta.get("appVersion") == "0.1.0")
        r.check(f"Chart.yaml: kubeVersion >={OLDEST_KUBE}-0, the oldest version validated (preStop sleep)",
                meta.get("kubeVersion") == f">={OLDEST_KUBE}-0" and kube_versions[0] == OLDEST_KUBE,
                f"{meta.get('kubeVersion')!r}, validating {kube_versions}")
        families = r.run("the server's metric families: " + (
            f"from {binary}'s /metrics" if binary else "from src/observe/metrics.rs (no binary built)"),
            lambda: check_objects.families_from_server(binary) if binary
            else check_objects.families_from_source(ROOT / "src" / "observe" / "metrics.rs"))
        exported = check_objects.sample_names(families or {})
        r.check(f"{len(families or {})} metric families found", len(families or {}) >= 15, str(families))
        r.check("values.schema.json is present", chart.schema is not None)
        check_readme_table(r, chart_dir)
        for name, bad in BAD_VALUES.items():
            try:
                chart.validate_schema(bad)
                r.check(f"schema rejects {name}", False, f"{bad} was accepted")
            except helm.HelmValuesError:
                r.check(f"schema rejects {name}", True)

        for name, (values, message) in REFUSED_RENDERS.items():
            r.run(f"schema accepts {name} (the chart refuses it)", lambda: chart.validate_schema(values))
            try:
                chart.render(values, name=RELEASE, namespace=NAMESPACE)
                r.check(f"chart refuses {name}", False, "it rendered")
            except Exception as e:  # noqa: BLE001 - the SDK raises its own error types
                r.check(f"chart refuses {name}", message in str(e), str(e)[:300])

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
            facts = check_chart_promises(r, values, chart, rendered, docs, exported)
            if scenario == "production" and facts:
                r.check("values-production.yaml: JSON log lines (MCP_HARBOR__LOG__FORMAT=json)",
                        facts["log_format"] == "json" and facts["env"].get("MCP_HARBOR__LOG__FORMAT") == "json")
            if binary is None:
                print("  skip  boot check: no built mcp-harbor binary (cargo build --release, or --binary)"
                      if not args.no_boot else "  skip  boot check (--no-boot)")
            elif scenario in NO_BOOT:
                print(f"  skip  boot check: {NO_BOOT[scenario]}")
            elif facts:
                check_boot(r, binary, facts, pg, scenario)

    print(f"\nhelm-check: {r.passed} passed, {r.failed} failed")
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
