"""Where the routing table comes from, refreshed in the background without a restart."""

from __future__ import annotations

import asyncio
import logging
import pathlib

import yaml

from .domain import GROUP, PLURALS, VERSION
from .routing import RoutingTable, deployments_from_objects

LOG = logging.getLogger("tokenfactory_gateway.routing")
ROUTED_KINDS = ("Model", "ModelDeployment")


class StaticFileSource:
    """YAML file holding Model/ModelDeployment objects (documents, or a List with `items`)."""

    def __init__(self, path: str):
        self.path = pathlib.Path(path)
        self._seen = None
        self._objects: list[dict] = []

    def fetch(self) -> list[dict]:
        stat = self.path.stat()
        if (stat.st_mtime_ns, stat.st_size, stat.st_ino) == self._seen:
            return self._objects
        self._objects, self._seen = self._parse(), (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        return self._objects

    def _parse(self) -> list[dict]:
        objects = []
        for doc in yaml.safe_load_all(self.path.read_text()):
            if not doc:
                continue
            objects.extend(doc.get("items", []) if doc.get("kind", "").endswith("List") else [doc])
        return objects


class KubernetesSource:
    """Lists Model and ModelDeployment custom objects through the Kubernetes API, with the collection's own
    client (plugins/module_utils/k8s): the same kubeconfig handling, a timeout on every request, and the same
    retries of 409/429/5xx answers (k8s/retries.py). The image carries those module_utils (PYTHONPATH
    /opt/gateway/collections); elsewhere the collection must be importable, beside requirements-kubernetes.txt."""

    def __init__(self, namespace: str = "", kubeconfig: str = "", request_timeout: float = 10.0):
        try:  # only this source needs the collection's client and the kubernetes extra
            from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import KubeClient, ResourceType
        except ImportError as exc:
            raise RuntimeError(
                "routing_source kubernetes needs the tokenfactory.spark collection's module_utils on the Python "
                f"path (the gateway image has them) and requirements-kubernetes.txt: {exc}"
            ) from exc
        params = {"kubeconfig": kubeconfig or None, "request_timeout": request_timeout}
        self.client = KubeClient(params, field_manager="tokenfactory-gateway", on_retry=LOG.warning)
        self.types = {kind: ResourceType(f"{GROUP}/{VERSION}", kind, PLURALS[kind]) for kind in ROUTED_KINDS}
        self.namespace = namespace

    def fetch(self) -> list[dict]:
        return [
            {**item, "kind": kind}
            for kind, rtype in self.types.items()
            for item in self.client.list(rtype, self.namespace or None)
        ]


def make_source(cfg):
    if cfg.routing_source == "kubernetes":
        return KubernetesSource(cfg.routing_namespace, cfg.kubeconfig, cfg.routing_request_timeout)
    return StaticFileSource(cfg.routing_file)


class RoutingRefresher:
    """Keeps `table` current; a failed refresh keeps the last good table and is logged and counted."""

    def __init__(self, source, endpoint: str, interval: float, metrics):
        self.source, self.endpoint, self.interval, self.metrics = source, endpoint, interval, metrics
        self.table = RoutingTable()
        self._task = None

    async def refresh(self) -> None:
        objects = await asyncio.to_thread(self.source.fetch)
        deployments = deployments_from_objects(objects, self.endpoint)
        self.table = RoutingTable(deployments)
        self.metrics.deployments.set(len(deployments))

    async def start(self) -> None:
        await self.refresh()  # the first load must work, or the gateway does not start
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.refresh()
            except Exception as exc:
                self.metrics.routing_errors.inc()
                LOG.error("routing refresh failed, keeping the last table: %s", exc)

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
