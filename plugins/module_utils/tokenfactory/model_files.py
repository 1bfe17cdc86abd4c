# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Reading a model's files through its Provider: the URL of each file, the credential, errors naming the URL.

What is supported (docs/modules.md):
- huggingface: <Provider url, default https://huggingface.co>/<org>/<name>/resolve/<revision, default main>/<file>,
  the Provider's token as `Authorization: Bearer` (only to that host, never logged).
- ngc: through a mirror in the hub's layout only (Provider url required):
  <url>/<org>/<team>/<name>/resolve/<revision, else the :tag, else main>/<file>, the API key as Bearer.
- s3: plain unsigned HTTPS GETs (public buckets, mirrors): <Provider url>/<bucket>/<key>/<file> (path style),
  else https://<bucket>.s3.amazonaws.com/<key>/<file>. The Provider's secret alone cannot sign a request.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

HUB_URL = "https://huggingface.co"
DEFAULT_REVISION = "main"
TIMEOUT_S = 15
MAX_JSON_BYTES = 32 * 2**20
MAX_SAFETENSORS_HEADER = 128 * 2**20


class FetchError(Exception):
    """A file could not be read. `answered` is False when the server was not reached or failed (5xx, timeout):
    fetching is impossible; True when it answered no (401, 403, 404) or sent something unreadable."""

    def __init__(self, url, message, answered, status=None):
        super().__init__(f"{url}: {message}")
        self.url, self.answered, self.status = url, answered, status


class UnsupportedSource(Exception):
    """The Provider's type offers no way to read this model's files (NGC without a mirror URL)."""


class _SameHostAuthorization(urllib.request.HTTPRedirectHandler):
    """Follow redirects; the credential goes along only while the host stays the same (a hub's CDN gets none)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        credential = req.unredirected_hdrs.get("Authorization")
        same_host = urllib.parse.urlsplit(newurl).netloc == urllib.parse.urlsplit(req.full_url).netloc
        if new is not None and credential and same_host:
            new.add_unredirected_header("Authorization", credential)
        return new


def _opener():
    return urllib.request.build_opener(_SameHostAuthorization)


def file_base(provider_type, source, revision=None, url=None):
    """The URL every file of the model is under (ending in '/'); UnsupportedSource when there is none."""
    url = (url or "").rstrip("/")
    if provider_type == "huggingface":
        return f"{url or HUB_URL}/{source}/resolve/{urllib.parse.quote(revision or DEFAULT_REVISION, safe='')}/"
    if provider_type == "ngc":
        if not url:
            raise UnsupportedSource(
                "NGC models are read only through a mirror in the hub's layout (set the Provider url)"
            )
        path, tag = source.partition(":")[::2]
        return f"{url}/{path}/resolve/{urllib.parse.quote(revision or tag or DEFAULT_REVISION, safe='')}/"
    if provider_type == "s3":
        bucket, key = source[len("s3://") :].partition("/")[::2]
        key = key.strip("/")
        base = f"{url}/{bucket}" if url else f"https://{bucket}.s3.amazonaws.com"
        return f"{base}/{key}/" if key else f"{base}/"
    raise UnsupportedSource(f"provider type {provider_type!r} has no known file layout")


class ModelFiles:
    """The files of one model revision, read over HTTP(S) with the Provider's credential."""

    def __init__(self, base, token=None, timeout=TIMEOUT_S):
        if urllib.parse.urlsplit(base).scheme not in ("http", "https"):
            raise UnsupportedSource(f"{base}: only http and https URLs are read")
        self.base, self._token, self.timeout = base, token, timeout
        self._open = _opener().open

    def url(self, name):
        return self.base + name

    def _request(self, name, byte_range=None):
        url = self.url(name)
        request = urllib.request.Request(url, headers={"User-Agent": "tokenfactory.spark"})  # noqa: S310 - http(s) only
        if self._token:
            request.add_unredirected_header("Authorization", f"Bearer {self._token}")
        if byte_range:
            request.add_header("Range", f"bytes={byte_range[0]}-{byte_range[1]}")
        try:
            return self._open(request, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            exc.close()
            raise FetchError(url, self._http_reason(exc), answered=exc.code < 500, status=exc.code) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise FetchError(url, f"not reachable ({reason})", answered=False) from None

    def _http_reason(self, exc):
        code = exc.headers.get("X-Error-Code") if exc.headers else None
        detail = f"HTTP {exc.code}" + (f" {code}" if code else "")
        if exc.code in (401, 403):
            sent = "was refused" if self._token else "is missing (the Provider has no credential)"
            return f"{detail}: the Provider's token {sent}"
        if exc.code == 404:
            return f"{detail}: not found (check source and revision)"
        return detail

    def json(self, name):
        with self._request(name) as response:
            data = response.read(MAX_JSON_BYTES + 1)
        if len(data) > MAX_JSON_BYTES:
            raise FetchError(self.url(name), f"larger than {MAX_JSON_BYTES} bytes", answered=True)
        try:
            value = json.loads(data)
        except ValueError as exc:
            raise FetchError(self.url(name), f"is not valid JSON ({exc})", answered=True) from None
        if not isinstance(value, dict):
            raise FetchError(self.url(name), "is not a JSON object", answered=True)
        return value

    def safetensors_header(self, name):
        """The JSON header of a .safetensors file: only its first bytes are read, never the weights."""
        url = self.url(name)
        with self._request(name, byte_range=(0, MAX_SAFETENSORS_HEADER + 7)) as response:
            size = response.read(8)
            length = int.from_bytes(size, "little") if len(size) == 8 else -1
            if not 0 < length <= MAX_SAFETENSORS_HEADER:
                raise FetchError(url, "is not a safetensors file (bad header length)", answered=True)
            data = response.read(length)
        try:
            header = json.loads(data)
        except ValueError as exc:
            raise FetchError(url, f"has an unreadable safetensors header ({exc})", answered=True) from None
        if not isinstance(header, dict):
            raise FetchError(url, "has an unreadable safetensors header (not an object)", answered=True)
        return header
