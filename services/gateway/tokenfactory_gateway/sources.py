"""Where the routing table comes from, refreshed in the background without a restart."""

from __future__ import annotations

import asyncio
import logging
import pathlib

import yaml

from .domain import GROUP, PLURALS, VERSION
from .routing import RoutingTable, deployments_from_objects

LOG = logging.getLogger("tokenfactory_gateway.routing")


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
    """Lists Model and ModelDeployment custom objects through the Kubernetes API."""

    def __init__(self, namespace: str = "", kubeconfig: str = ""):
        from kubernetes import client, config  # the extra is only needed for this source

        if kubeconfig:
            config.load_kube_config(config_file=kubeconfig)
        else:
            try:
                config.load_incluster_config()
            except config.ConfigException:
                config.load_kube_config()
        self.api = client.CustomObjectsApi()
        self.namespace = namespace

    def _list(self, plural: str, kind: str) -> list[dict]:
        if self.namespace:
            found = self.api.list_namespaced_custom_object(GROUP, VERSION, self.namespace, plural)
        else:
            found = self.api.list_cluster_custom_object(GROUP, VERSION, plural)
        return [{**item, "kind": kind} for item in found.get("items", [])]

    def fetch(self) -> list[dict]:
        return self._list(PLURALS["Model"], "Model") + self._list(PLURALS["ModelDeployment"], "ModelDeployment")


def make_source(cfg):
    if cfg.routing_source == "kubernetes":
        return KubernetesSource(cfg.routing_namespace, cfg.kubeconfig)
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
