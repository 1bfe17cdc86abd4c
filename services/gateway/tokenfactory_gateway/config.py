"""Gateway settings: a YAML file, overridden by TF_GATEWAY_* environment variables.

Secrets (admin token, key pepper, database URL) may also come from `<name>_file` settings so they
never appear in process arguments or the config file.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib

import yaml

ENV_PREFIX = "TF_GATEWAY_"
SECRETS = ("admin_token", "key_pepper", "database_url")


@dataclasses.dataclass
class Config:
    # Public listener: only the OpenAI routes (/v1/...). "HOST:PORT", several separated by commas; overrides
    # host and port when set. HTTPS when tls_cert_file and tls_key_file are set.
    host: str = "0.0.0.0"  # noqa: S104 - a service listens on all interfaces inside its pod
    port: int = 8080
    listen: str = ""
    # Internal listener (plain HTTP, cluster-internal Service): admin API, /metrics, /health, /ready.
    internal_listen: str = "0.0.0.0:8081"
    reuse_port: bool = False  # SO_REUSEPORT on the public listener: several processes behind one port
    tls_cert_file: str = ""  # PEM certificate chain (the Endpoint's TLS Secret, mounted)
    tls_key_file: str = ""
    tls_reload_seconds: float = 5.0  # how often the files are checked; a changed pair is used without restart
    database_url: str = ""
    database_timeout: float = 5.0  # each PostgreSQL connect/statement; past it: 503 or spooled, never a hang
    redis_url: str = "redis://127.0.0.1:6379/0"
    redis_key_prefix: str = "tf:"
    redis_timeout: float = 2.0
    startup_wait_seconds: float = 60.0  # start-up retries PostgreSQL and Redis this long before it gives up
    admin_token: str = ""
    key_pepper: str = ""
    # Routing source: "static" (routing_file with Token Factory objects) or "kubernetes".
    routing_source: str = "static"
    routing_file: str = ""
    routing_namespace: str = ""  # empty: all namespaces
    routing_endpoint: str = ""  # only deployments of this Endpoint; empty: all
    routing_refresh_seconds: float = 5.0
    routing_request_timeout: float = 10.0  # each Kubernetes API request of the kubernetes source
    kubeconfig: str = ""  # empty: in-cluster service account, then ~/.kube/config
    max_body_bytes: int = 4 * 1024 * 1024
    upstream_connect_timeout: float = 5.0
    upstream_read_timeout: float = 600.0  # longest silence allowed between two upstream reads
    drain_timeout: float = 120.0  # after a client disconnect, keep reading upstream this long for usage
    shutdown_timeout: float = 60.0  # SIGTERM: how long in-flight requests may take to finish
    auth_cache_seconds: float = 30.0
    metering_batch_size: int = 1000
    metering_flush_interval: float = 0.1  # seconds a record may wait to share an insert (it is journaled first)
    spool_dir: str = "/var/lib/tokenfactory-gateway/spool"  # the usage journal; survives a container restart
    spool_fsync_seconds: float = 1.0  # journal fsync period (host crash window); 0: never fsync
    event_loop_probe_seconds: float = 0.1  # period of the event-loop lag probe (0: off)
    gc_young_threshold: int = 50_000  # allocations between young collections (Python: 700; see docs/gateway.md)
    access_log: bool = True
    log_level: str = "INFO"

    @property
    def public_addresses(self) -> list[tuple[str, int]]:
        return parse_addresses(self.listen, "listen") if self.listen else [(self.host, self.port)]

    @property
    def internal_address(self) -> tuple[str, int]:
        return parse_addresses(self.internal_listen, "internal_listen")[0]


def parse_addresses(value: str, name: str) -> list[tuple[str, int]]:
    """`HOST:PORT[,HOST:PORT...]` ([v6]:PORT accepted) -> [(host, port)]; names the setting when malformed."""
    result = []
    for item in value.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{name} must look like HOST:PORT (several separated by commas), got {value!r}")
        result.append((host.strip("[]"), int(port)))
    return result


def _coerce(field: dataclasses.Field, raw):
    kind = field.type
    if kind == "bool" and isinstance(raw, str):
        return raw.strip().lower() in {"1", "true", "yes", "on"}
    return {"int": int, "float": float, "bool": bool, "str": str}[kind](raw)


def load(path: str | None = None, environ=None) -> Config:
    """Build the Config from an optional YAML file and the environment; fail naming the bad field."""
    environ = os.environ if environ is None else environ
    values: dict = {}
    if path:
        values.update(yaml.safe_load(pathlib.Path(path).read_text()) or {})
    fields = {f.name: f for f in dataclasses.fields(Config)}
    for name in fields:
        if ENV_PREFIX + name.upper() in environ:
            values[name] = environ[ENV_PREFIX + name.upper()]
    for name in SECRETS:
        file_key = f"{name}_file"
        env_file = environ.get(ENV_PREFIX + file_key.upper())
        source = env_file or values.pop(file_key, None)
        if source and not values.get(name):
            values[name] = pathlib.Path(source).read_text().strip()
        values.pop(file_key, None)
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(f"unknown gateway setting(s) {unknown}; allowed: {sorted(fields)}")
    cfg = Config()
    for name, raw in values.items():
        try:
            setattr(cfg, name, _coerce(fields[name], raw))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"gateway setting {name!r}: cannot use {raw!r} as {fields[name].type}") from exc
    validate(cfg)
    return cfg


POSITIVE = (
    "database_timeout",
    "redis_timeout",
    "startup_wait_seconds",
    "routing_request_timeout",
    "tls_reload_seconds",
    "shutdown_timeout",
    "metering_flush_interval",
)


def validate(cfg: Config) -> None:
    public = cfg.public_addresses
    cfg.host, cfg.port = public[0]
    if len(parse_addresses(cfg.internal_listen, "internal_listen")) != 1:
        raise ValueError(f"internal_listen takes one HOST:PORT, got {cfg.internal_listen!r}")
    if any(port == cfg.internal_address[1] for _host, port in public):
        raise ValueError(
            f"internal_listen {cfg.internal_listen!r} must use another port than the public listener {public}: "
            "the admin API, metrics and probes must not be reachable through the public Endpoint"
        )
    if bool(cfg.tls_cert_file) != bool(cfg.tls_key_file):
        raise ValueError("tls_cert_file and tls_key_file go together (both set: HTTPS; both empty: HTTP)")
    for name in POSITIVE:
        if getattr(cfg, name) < 0 or (name != "metering_flush_interval" and getattr(cfg, name) == 0):
            raise ValueError(f"{name} must be a positive number of seconds, got {getattr(cfg, name)!r}")
    if cfg.routing_source not in {"static", "kubernetes"}:
        raise ValueError(f"routing_source must be one of ['kubernetes', 'static'], got {cfg.routing_source!r}")
    if cfg.routing_source == "static" and not cfg.routing_file:
        raise ValueError("routing_file is required when routing_source is 'static'")
    for name in ("database_url", "admin_token", "key_pepper"):
        if not getattr(cfg, name):
            raise ValueError(f"{name} is required (setting, {ENV_PREFIX}{name.upper()} or {name}_file)")
    if len(cfg.key_pepper) < 16:
        raise ValueError("key_pepper must be at least 16 characters")
    if len(cfg.admin_token) < 16:
        raise ValueError("admin_token must be at least 16 characters")
