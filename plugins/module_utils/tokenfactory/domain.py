# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""The domain of the Token Factory objects, as data: the one place each fact is decided.

Group/version, kinds and plurals, enums, phases, bounds, name formats and, per kind, which module option
becomes which spec field with which type and bound. Everything else derives from it: the CRD schemas
(crds.py), the modules' argument specs and input checks (options.py), and the gateway's reading of the
objects (services/gateway reads the same data from tokenfactory_gateway/domain.json, generated from this
file by scripts/write-gateway-domain and checked identical by a unit test).

Only JSON-compatible data here (the gateway copy is JSON). The engine enum is the engines registry
(engines/__init__.py), so that adding an engine touches the engines package only.
"""

from __future__ import annotations

GROUP = "tokenfactory.io"
VERSION = "v1alpha1"
API_VERSION = GROUP + "/" + VERSION
# Who manages what this collection writes: server-side apply field manager and app.kubernetes.io/managed-by.
MANAGED_BY = "tokenfactory.spark"

KINDS = {
    "ComputeCluster": {"plural": "computeclusters", "shortNames": ["cc"]},
    "Endpoint": {"plural": "endpoints", "shortNames": ["tfep"]},
    "Provider": {"plural": "providers", "shortNames": ["tfprov"]},
    "Model": {"plural": "models", "shortNames": ["tfmodel"]},
    "ModelDeployment": {"plural": "modeldeployments", "shortNames": ["md"]},
}

# ---- where the gateway runs -------------------------------------------------------------------------
# The gateway role deploys it here by default (roles/gateway/defaults: a unit test keeps them equal); an Endpoint
# names this Service unless told otherwise.
GATEWAY_NAMESPACE = "tokenfactory-system"
GATEWAY_SERVICE_NAME = "tokenfactory-gateway"
GATEWAY_PORT = 8080

# ---- phases (status.phase) --------------------------------------------------------------------------
# What the modules write: a ModelDeployment is Pending (queued, unschedulable or scaled to zero),
# Progressing (rolling out), Ready (every replica updated and available) or Failed (the rollout cannot finish).
PENDING, PROGRESSING, READY, FAILED = "Pending", "Progressing", "Ready", "Failed"
DEPLOYMENT_PHASES = [PENDING, PROGRESSING, READY, FAILED]
# The gateway sends traffic to a deployment only in these phases.
ROUTABLE_PHASES = [READY]

# ---- enums ------------------------------------------------------------------------------------------
COMPUTE_PROFILES = ["gpu", "cpu"]
# Volumes of a ModelDeployment's weights cache (ModelDeployment.spec.weightsCache.type).
WEIGHTS_CACHE_TYPES = ["hostPath", "persistentVolumeClaim", "emptyDir"]
# Per provider type: the source format the Model must use, the env variable engines read the credential from and
# the one that points them at Provider.spec.url (a mirror of the hub, an S3 endpoint) when it is set.
PROVIDER_TYPES = {
    "huggingface": {
        "source": r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$",
        "sourceExample": "a Hugging Face repo id like Qwen/Qwen2-0.5B-Instruct",
        "credentialEnv": "HF_TOKEN",
        "urlEnv": "HF_ENDPOINT",
    },
    "ngc": {
        "source": r"^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)+(:[A-Za-z0-9._-]+)?$",
        "sourceExample": "an NGC path like nim/meta/llama-3.1-8b-instruct[:tag]",
        "credentialEnv": "NGC_API_KEY",
    },
    "s3": {
        "source": r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/\S*)?$",
        "sourceExample": "an object storage URL like s3://bucket/path/to/model",
        "credentialEnv": "AWS_SECRET_ACCESS_KEY",
        "urlEnv": "AWS_ENDPOINT_URL",
    },
}
# Weight storage types and bytes per parameter (4-bit formats carry block scales: about 4.5 bits per weight).
DTYPES = {
    "float32": "4",
    "bfloat16": "2",
    "float16": "2",
    "fp8": "1",
    "nvfp4": "0.5625",
    "int4": "0.5625",
}
# Model status, written by the model module: the architecture facts it derived (from the weights' config.json
# and weight index read through the Provider, or from the built-in table) and what they were derived from. A re-run
# whose provider, source, revision and provider URL match `architectureFrom` reuses them instead of fetching again.
MODEL_STATUS = {"architecture": "architecture", "from": "architectureFrom"}
MODEL_ARCHITECTURE_FROM = ["provider", "source", "revision", "providerURL", "origin"]
KV_CACHE_DTYPES = ["auto", "fp8"]
CURRENCY_DEFAULT = "USD"

# ---- name formats: JSON-schema pattern (+ length) and the words an error uses --------------------------
FORMATS = {
    "dnsLabel": {"pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63},
    "dnsSubdomain": {
        "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
        "maxLength": 253,
    },
    "quantity": {"pattern": r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$"},
    "decimal": {"pattern": r"^[0-9]+(\.[0-9]{1,6})?$"},
    "currency": {"pattern": r"^[A-Z]{3}$"},
    "url": {"pattern": r"^https?://[^\s/]+(/[^\s]*)?$", "maxLength": 2048},
    "envName": {"pattern": r"^[A-Za-z_][A-Za-z0-9_]*$"},
    "servedName": {"pattern": r"^[A-Za-z0-9][A-Za-z0-9._/:-]*$", "maxLength": 256},
    "imageTag": {"pattern": r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"},
    "absolutePath": {"pattern": r"^(/[A-Za-z0-9_.+-]+)+$", "maxLength": 512},
}

# ---- limits ----------------------------------------------------------------------------------------
# Every rate limit is a per-minute count with one bound and one meaning: 0..PER_MINUTE_MAX, 0 = unlimited.
# The same bound holds for a tenant's own limits, a key's own limits and a deployment's limits.
PER_MINUTE_MAX = 1_000_000_000
UNLIMITED = 0
LIMIT_FIELDS = {"requests_per_minute": "requestsPerMinute", "tokens_per_minute": "tokensPerMinute"}
DEPLOYMENT_LIMIT_SCOPES = {
    "per_key": {"field": "perKey", "bucket": "key_on_deployment"},
    "per_tenant": {"field": "perTenant", "bucket": "tenant_on_deployment"},
    "per_deployment": {"field": "perDeployment", "bucket": "deployment"},
}
PRICING_FIELDS = {"currency": "currency", "input_per_1m": "inputPer1M", "output_per_1m": "outputPer1M"}

# ---- spend budgets ---------------------------------------------------------------------------------------
# A tenant's and a key's budget (admin API field `budget`, module option `budget`): spend per calendar period
# (UTC), as an amount in the deployments' currency (cost = tokens x price per 1M) and/or as tokens; 0 = none.
BUDGET_PERIODS = ("day", "month")
BUDGET_PERIOD_DEFAULT = "month"
BUDGET_TOKENS_MAX = 10**15
BUDGET_FIELDS = {"period": "period", "amount": "amount", "tokens": "tokens"}


# ---- fields of each kind: module option -> spec field -------------------------------------------------
# An entry: field (spec name), type (JSON schema type), and optionally format (FORMATS), enum, minimum, maximum,
# minLength/maxLength, maxItems, items (for arrays), options (for objects: nested entries), required (in the CRD),
# default (the module's default), atLeast (smallest quantity), unit (perMinute: a rate limit), optionType (when
# the option's shape differs from the field's), secret (never logged: no_log), and crdOnly for fields the module
# fills from other options.
def _limits():
    return {
        option: {
            "field": field,
            "type": "integer",
            "unit": "perMinute",
            "minimum": UNLIMITED,
            "maximum": PER_MINUTE_MAX,
        }
        for option, field in LIMIT_FIELDS.items()
    }


REPLICAS = {"minimum": 0, "maximum": 64}
SCALED_REPLICAS = {"minimum": 1, "maximum": 64}
GPUS = {"minimum": 1, "maximum": 64}
PORT = {"minimum": 1, "maximum": 65535}

FIELDS = {
    "ComputeCluster": {
        "profile": {
            "field": "profile",
            "type": "string",
            "enum": COMPUTE_PROFILES,
            "default": "gpu",
            "required": True,
            "description": "gpu needs an allocatable GPU; cpu allows none",
        },
        "node_selector": {"field": "nodeSelector", "type": "object", "valuesType": "string", "default": {}},
        "description": {"field": "description", "type": "string", "maxLength": 256},
    },
    "Endpoint": {
        "hostname": {"field": "hostname", "type": "string", "format": "dnsSubdomain", "required": True},
        "port": {"field": "port", "type": "integer", **PORT},
        "compute_cluster": {"field": "computeCluster", "type": "string", "format": "dnsSubdomain", "required": True},
        "gateway": {
            "field": "gateway",
            "type": "object",
            "required": True,
            "default": {},
            "options": {
                "service_name": {
                    "field": "serviceName",
                    "type": "string",
                    "format": "dnsLabel",
                    "required": True,
                    "default": GATEWAY_SERVICE_NAME,
                },
                "namespace": {
                    "field": "namespace",
                    "type": "string",
                    "format": "dnsLabel",
                    "default": GATEWAY_NAMESPACE,
                },
                "port": {"field": "port", "type": "integer", "default": GATEWAY_PORT, **PORT},
            },
        },
        "tls": {
            "field": "tls",
            "type": "object",
            "crdOnly": True,
            "options": {
                "secret_name": {"field": "secretName", "type": "string", "format": "dnsSubdomain", "required": True}
            },
        },
        "external_url": {"field": "externalURL", "type": "string", "format": "url"},
    },
    "Provider": {
        "type": {"field": "type", "type": "string", "enum": sorted(PROVIDER_TYPES), "required": True},
        "display_name": {"field": "displayName", "type": "string", "maxLength": 128},
        "url": {"field": "url", "type": "string", "format": "url"},
        "credentials_secret": {
            "field": "credentialsSecret",
            "type": "object",
            "crdOnly": True,
            "options": {
                "name": {"field": "name", "type": "string", "format": "dnsSubdomain", "required": True},
                "key": {"field": "key", "type": "string", "minLength": 1, "maxLength": 253, "required": True},
            },
        },
    },
    "Model": {
        "provider": {"field": "provider", "type": "string", "format": "dnsSubdomain", "required": True},
        "source": {"field": "source", "type": "string", "minLength": 1, "maxLength": 1024, "required": True},
        "revision": {"field": "revision", "type": "string", "minLength": 1, "maxLength": 128},
        "served_name": {"field": "servedName", "type": "string", "format": "servedName", "required": True},
        "architecture": {
            "field": "architecture",
            "type": "object",
            "required": True,
            "options": {
                "parameters_billions": {
                    "field": "parametersBillions",
                    "type": "string",
                    "format": "decimal",
                    "required": True,
                },
                "num_layers": {
                    "field": "numLayers",
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 1024,
                    "required": True,
                },
                "num_kv_heads": {
                    "field": "numKVHeads",
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 1024,
                    "required": True,
                },
                "head_dim": {"field": "headDim", "type": "integer", "minimum": 1, "maximum": 4096, "required": True},
                "max_context_length": {
                    "field": "maxContextLength",
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 10_000_000,
                    "required": True,
                },
                "dtype": {"field": "dtype", "type": "string", "enum": list(DTYPES), "required": True},
            },
        },
    },
    "ModelDeployment": {
        "model": {"field": "model", "type": "string", "format": "dnsSubdomain", "required": True},
        "endpoint": {"field": "endpoint", "type": "string", "format": "dnsSubdomain", "required": True},
        "engine": {"field": "engine", "type": "string", "enum": "engines", "default": "vllm", "required": True},
        "image": {"field": "image", "type": "string", "minLength": 1, "maxLength": 512},
        "version": {"field": "version", "type": "string", "format": "imageTag"},
        "replicas": {"field": "replicas", "type": "integer", "default": 1, "required": True, **REPLICAS},
        "gpus_per_replica": {"field": "gpusPerReplica", "type": "integer", "default": 1, "required": True, **GPUS},
        "gpu_type": {"field": "gpuType", "type": "string", "minLength": 1, "maxLength": 128, "required": True},
        "resources": {
            "field": "resources",
            "type": "object",
            "options": {
                side: {
                    "field": side,
                    "type": "object",
                    "options": {
                        "cpu": {"field": "cpu", "type": "string", "format": "quantity", "atLeast": "1m"},
                        "memory": {"field": "memory", "type": "string", "format": "quantity", "atLeast": "1Mi"},
                    },
                }
                for side in ("requests", "limits")
            },
        },
        "weights_volume_size": {
            "field": "weightsVolumeSize",
            "type": "string",
            "format": "quantity",
            "atLeast": "1Gi",
            "default": "50Gi",
        },
        # Where weights and compile caches live: a directory on the node (its NVMe), shared by the replicas there, a
        # claim (a per-node or a ReadWriteMany volume), or the pod's own emptyDir (gone with the pod).
        "weights_cache": {
            "field": "weightsCache",
            "type": "object",
            "options": {
                "type": {"field": "type", "type": "string", "enum": WEIGHTS_CACHE_TYPES, "default": "hostPath"},
                "path": {
                    "field": "path",
                    "type": "string",
                    "format": "absolutePath",
                    "default": "/var/lib/tokenfactory/models",
                },
                "claim_name": {"field": "claimName", "type": "string", "format": "dnsSubdomain"},
                "offline": {"field": "offline", "type": "boolean", "default": False},
            },
            "rules": [
                [
                    "self.type != 'persistentVolumeClaim' || has(self.claimName)",
                    "type persistentVolumeClaim needs claimName",
                ]
            ],
        },
        "context_length": {"field": "contextLength", "type": "integer", "minimum": 16, "maximum": 10_000_000},
        "gpu_memory_utilization": {"field": "gpuMemoryUtilization", "type": "number", "minimum": 0.05, "maximum": 0.95},
        "kv_cache_dtype": {"field": "kvCacheDtype", "type": "string", "enum": KV_CACHE_DTYPES, "default": "auto"},
        "prefix_caching": {"field": "prefixCaching", "type": "boolean", "default": True},
        "extra_args": {
            "field": "extraArgs",
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": 1024},
            "maxItems": 64,
            "default": [],
        },
        # The option is a mapping NAME: value; the spec field a list of {name, value} (sorted by name).
        "env": {
            "field": "env",
            "type": "array",
            "items": {
                "type": "object",
                "options": {
                    "name": {"field": "name", "type": "string", "format": "envName", "required": True},
                    "value": {"field": "value", "type": "string"},
                },
            },
            "optionType": "dict",
            "default": {},
        },
        "autoscaling": {
            "field": "autoscaling",
            "type": "object",
            "options": {
                "min_replicas": {"field": "minReplicas", "type": "integer", "required": True, **SCALED_REPLICAS},
                "max_replicas": {"field": "maxReplicas", "type": "integer", "required": True, **SCALED_REPLICAS},
                "target_waiting_requests": {
                    "field": "targetWaitingRequests",
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 10_000,
                },
            },
            "rules": [["self.minReplicas <= self.maxReplicas", "minReplicas must be <= maxReplicas"]],
        },
        "disruption_budget": {
            "field": "disruptionBudget",
            "type": "object",
            "options": {"min_available": {"field": "minAvailable", "type": "integer", "required": True, **REPLICAS}},
        },
        "tenants": {
            "field": "tenants",
            "type": "array",
            "items": {"type": "string", "format": "dnsSubdomain"},
            "maxItems": 1000,
            "default": [],
        },
        "rate_limits": {
            "field": "rateLimits",
            "type": "object",
            "options": {
                scope: {"field": entry["field"], "type": "object", "options": _limits()}
                for scope, entry in DEPLOYMENT_LIMIT_SCOPES.items()
            },
        },
        "pricing": {
            "field": "pricing",
            "type": "object",
            "options": {
                "currency": {
                    "field": "currency",
                    "type": "string",
                    "format": "currency",
                    "default": CURRENCY_DEFAULT,
                    "required": True,
                },
                "input_per_1m": {"field": "inputPer1M", "type": "string", "format": "decimal", "required": True},
                "output_per_1m": {"field": "outputPer1M", "type": "string", "format": "decimal", "required": True},
            },
        },
        "upstream_url": {"field": "upstreamURL", "type": "string", "format": "url"},
    },
}


# What the gateway reads of each engine: engine module attribute -> its name in the gateway's copy.
ENGINE_GATEWAY_FACTS = {"RUNNING_USAGE": "runningUsage"}


def gateway_view(engines):
    """What the gateway reads (written to tokenfactory_gateway/domain.json by scripts/write-gateway-domain).

    `engines` is the engines registry (engines.ENGINES, which imports this module): each engine's capabilities
    come from its own module, so the gateway never switches on an engine's name.
    """
    deployment = FIELDS["ModelDeployment"]
    return {
        "engines": {
            name: {key: getattr(plugin, attribute) for attribute, key in ENGINE_GATEWAY_FACTS.items()}
            for name, plugin in engines.items()
        },
        "group": GROUP,
        "version": VERSION,
        "kinds": {kind: KINDS[kind]["plural"] for kind in ("Model", "ModelDeployment")},
        "routablePhases": ROUTABLE_PHASES,
        "perMinuteMax": PER_MINUTE_MAX,
        "unlimited": UNLIMITED,
        "limitFields": LIMIT_FIELDS,
        "deploymentLimitScopes": {scope: entry["field"] for scope, entry in DEPLOYMENT_LIMIT_SCOPES.items()},
        "pricingFields": PRICING_FIELDS,
        "currencyDefault": CURRENCY_DEFAULT,
        "budgetPeriods": list(BUDGET_PERIODS),
        "budgetPeriodDefault": BUDGET_PERIOD_DEFAULT,
        "budgetTokensMax": BUDGET_TOKENS_MAX,
        "budgetFields": BUDGET_FIELDS,
        "engineDefault": deployment["engine"]["default"],
        "fields": {
            "engine": deployment["engine"]["field"],
            "rateLimits": deployment["rate_limits"]["field"],
            "pricing": deployment["pricing"]["field"],
            "tenants": deployment["tenants"]["field"],
            "upstreamURL": deployment["upstream_url"]["field"],
            "servedName": FIELDS["Model"]["served_name"]["field"],
        },
    }
