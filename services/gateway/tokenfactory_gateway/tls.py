"""TLS of the public listener: certificate and key from files (the Endpoint's TLS Secret, mounted), re-read when
they change, without a restart.

Every reload builds a new SSLContext from the files (so a certificate and key that do not match are refused
whole, and the previous pair stays in use); the listener's context hands each new handshake to the newest one
from its SNI callback. Connections already open keep the certificate they started with.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl

LOG = logging.getLogger("tokenfactory_gateway.tls")


def server_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


class CertificateReloader:
    def __init__(self, cert_file: str, key_file: str, interval: float, metrics=None):
        self.cert_file, self.key_file, self.interval, self.metrics = cert_file, key_file, interval, metrics
        self._stamp = self._files()
        self.current = server_context(cert_file, key_file)  # start-up fails here if the pair is unusable
        self.context = server_context(cert_file, key_file)  # the listener's: picks `current` per handshake
        self.context.sni_callback = self._select
        self._task = None

    def _select(self, ssl_object, _server_name, _context) -> None:
        if self.current is not self.context:
            ssl_object.context = self.current

    def _files(self) -> tuple:
        # A Kubernetes Secret volume swaps a symlink: stat() follows it, so a new pair has a new inode.
        return tuple((s.st_ino, s.st_mtime_ns, s.st_size) for s in map(os.stat, (self.cert_file, self.key_file)))

    def reload_if_changed(self) -> bool:
        try:
            stamp = self._files()
            if stamp == self._stamp:
                return False
            self.current = server_context(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:  # e.g. halfway through an update: keep serving the last good pair
            LOG.error("TLS certificate reload failed, keeping the previous one: %s", exc)
            if self.metrics:
                self.metrics.tls_reloads.labels("failed").inc()
            return False
        self._stamp = stamp
        LOG.info("TLS certificate reloaded from %s", self.cert_file)
        if self.metrics:
            self.metrics.tls_reloads.labels("loaded").inc()
        return True

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch())

    def stop(self) -> None:
        if self._task:
            self._task.cancel()

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.reload_if_changed()
