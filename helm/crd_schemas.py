"""Structural schemas of the custom resources the mcp-harbor chart renders, which
kubernetes-validate (built-in kinds only) has no schema for: the Prometheus Operator's
ServiceMonitor and PrometheusRule, KEDA's ScaledObject and the Gateway API's HTTPRoute. Each
follows its CRD's OpenAPI schema for the fields it lists (unknown fields fail, as with the strict
built-in kinds), typed where the chart sets them. helm/check.py validates rendered manifests
against SCHEMAS.
"""

from __future__ import annotations

import re

# A Prometheus duration (the CRD's pattern) and its length in milliseconds.
PROM_DURATION = re.compile(r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?"
                           r"(([0-9]+)s)?(([0-9]+)ms)?)$")
_LABEL_VALUE = {"type": "string", "pattern": r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$"}
_LABELS = {"type": "object", "additionalProperties": _LABEL_VALUE}
# monitoring.coreos.com/v1 ServiceMonitor, after the Prometheus Operator's CRD: every field it
# defines for the spec and an endpoint (unknown ones fail, as with the strict built-in kinds),
# typed where the chart sets them.
SERVICE_MONITOR_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "maxLength": 253,
                         "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"},
                "namespace": {"type": "string"},
                "labels": _LABELS,
                "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["selector", "endpoints"],
            "properties": {
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"matchLabels": _LABELS,
                                   "matchExpressions": {"type": "array", "items": {"type": "object"}}},
                },
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"any": {"type": "boolean"},
                                   "matchNames": {"type": "array", "items": {"type": "string"}}},
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string", "minLength": 1},
                            "targetPort": {"type": ["integer", "string"]},
                            "path": {"type": "string", "pattern": "^/"},
                            "scheme": {"enum": ["http", "https", "HTTP", "HTTPS"]},
                            "interval": {"type": "string", "pattern": PROM_DURATION.pattern},
                            "scrapeTimeout": {"type": "string", "pattern": PROM_DURATION.pattern},
                            **{k: {} for k in (
                                "authorization", "basicAuth", "bearerTokenFile", "bearerTokenSecret",
                                "enableHttp2", "filterRunning", "followRedirects", "honorLabels",
                                "honorTimestamps", "metricRelabelings", "noProxy", "oauth2", "params",
                                "proxyConnectHeader", "proxyFromEnvironment", "proxyUrl", "relabelings",
                                "tlsConfig", "trackTimestampsStaleness")},
                        },
                        "not": {"required": ["port", "targetPort"]},
                    },
                },
                **{k: {} for k in (
                    "attachMetadata", "bodySizeLimit", "fallbackScrapeProtocol", "jobLabel",
                    "keepDroppedTargets", "labelLimit", "labelNameLengthLimit", "labelValueLengthLimit",
                    "nativeHistogramBucketLimit", "nativeHistogramMinBucketFactor", "podTargetLabels",
                    "sampleLimit", "scrapeClass", "scrapeClassicHistograms", "scrapeProtocols",
                    "selectorMechanism", "targetLabels", "targetLimit")},
            },
        },
    },
}

_METADATA = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "maxLength": 253, "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"},
        "namespace": {"type": "string"},
        "labels": _LABELS,
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}

# monitoring.coreos.com/v1 PrometheusRule: groups of alerting rules.
PROMETHEUS_RULE_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": _METADATA,
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "groups": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name", "rules"],
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "interval": {"type": "string", "pattern": PROM_DURATION.pattern},
                            "limit": {"type": "integer"},
                            "labels": _LABELS,
                            "partial_response_strategy": {"type": "string"},
                            "query_offset": {"type": "string"},
                            "rules": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "required": ["expr"],
                                    "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
                                    "properties": {
                                        "alert": {"type": "string", "minLength": 1},
                                        "record": {"type": "string", "minLength": 1},
                                        "expr": {"type": ["string", "integer"]},
                                        "for": {"type": "string", "pattern": PROM_DURATION.pattern},
                                        "keep_firing_for": {"type": "string"},
                                        "labels": {"type": "object",
                                                   "additionalProperties": {"type": "string"}},
                                        "annotations": {"type": "object",
                                                        "additionalProperties": {"type": "string"}},
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}

_SCALE_TARGET = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                   "name": {"type": "string"}, "envSourceContainerName": {"type": "string"}},
}

# keda.sh/v1alpha1 ScaledObject.
SCALED_OBJECT_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "keda.sh/v1alpha1"},
        "kind": {"const": "ScaledObject"},
        "metadata": _METADATA,
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["scaleTargetRef", "triggers"],
            "properties": {
                "scaleTargetRef": _SCALE_TARGET,
                "minReplicaCount": {"type": "integer", "minimum": 0},
                "maxReplicaCount": {"type": "integer", "minimum": 1},
                "idleReplicaCount": {"type": "integer"},
                "pollingInterval": {"type": "integer", "minimum": 1},
                "cooldownPeriod": {"type": "integer"},
                "initialCooldownPeriod": {"type": "integer"},
                "fallback": {"type": "object"},
                "advanced": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "restoreToOriginalReplicaCount": {"type": "boolean"},
                        "scalingModifiers": {"type": "object"},
                        "horizontalPodAutoscalerConfig": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {"name": {"type": "string"},
                                           "behavior": {"type": "object"}},
                        },
                    },
                },
                "triggers": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["type", "metadata"],
                        "properties": {
                            "type": {"type": "string"},
                            "name": {"type": "string"},
                            "metricType": {"enum": ["AverageValue", "Value", "Utilization"]},
                            "useCachedMetrics": {"type": "boolean"},
                            "authenticationRef": {"type": "object"},
                            "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
                        },
                    },
                },
            },
        },
    },
}

_GATEWAY_DURATION = {"type": "string", "pattern": r"^([0-9]{1,5}(h|m|s|ms)){1,4}$"}
_PARENT_REF = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {"group": {"type": "string"}, "kind": {"type": "string"},
                   "namespace": {"type": "string"}, "name": {"type": "string", "minLength": 1},
                   "sectionName": {"type": "string"}, "port": {"type": "integer"}},
}
_PATH_MATCH = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "path": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"type": {"enum": ["Exact", "PathPrefix", "RegularExpression"]},
                           "value": {"type": "string", "pattern": "^/", "maxLength": 1024}},
        },
        "headers": {"type": "array"}, "queryParams": {"type": "array"}, "method": {"type": "string"},
    },
}

# gateway.networking.k8s.io/v1 HTTPRoute (rule timeouts: Gateway API v1.2 and later).
HTTP_ROUTE_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "gateway.networking.k8s.io/v1"},
        "kind": {"const": "HTTPRoute"},
        "metadata": _METADATA,
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "parentRefs": {"type": "array", "maxItems": 32, "items": _PARENT_REF},
                "hostnames": {"type": "array", "maxItems": 16,
                              "items": {"type": "string", "pattern": r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"}},
                "rules": {
                    "type": "array",
                    "maxItems": 16,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "name": {"type": "string"},
                            "matches": {"type": "array", "maxItems": 64, "items": _PATH_MATCH},
                            "filters": {"type": "array"},
                            "backendRefs": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "required": ["name"],
                                    "properties": {"group": {"type": "string"}, "kind": {"type": "string"},
                                                   "name": {"type": "string"}, "namespace": {"type": "string"},
                                                   "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                                                   "weight": {"type": "integer"}, "filters": {"type": "array"}},
                                },
                            },
                            "timeouts": {
                                "type": "object",
                                "additionalProperties": False,
                                "properties": {"request": _GATEWAY_DURATION,
                                               "backendRequest": _GATEWAY_DURATION},
                            },
                            "sessionPersistence": {"type": "object"},
                            "retry": {"type": "object"},
                        },
                    },
                },
            },
        },
    },
}

# (apiVersion, kind) -> schema.
SCHEMAS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): SERVICE_MONITOR_SCHEMA,
    ("monitoring.coreos.com/v1", "PrometheusRule"): PROMETHEUS_RULE_SCHEMA,
    ("keda.sh/v1alpha1", "ScaledObject"): SCALED_OBJECT_SCHEMA,
    ("gateway.networking.k8s.io/v1", "HTTPRoute"): HTTP_ROUTE_SCHEMA,
}
