"""SIMULATION of the public internet: a stand-in for the Hugging Face hub, serving model repositories from a
directory in the hub's HTTP layout, so engines download weights the way production does (HF_ENDPOINT, i.e.
Provider.spec.url) instead of finding them baked into an image.

    python -m lab.hub --root DIR --listen HOST:PORT      # DIR/<org>/<name>/<files> = the repositories

What huggingface_hub (2.x) and transformers ask for is answered: repository info
(GET /api/models/<repo>[/revision/<rev>]), the file tree (GET /api/models/<repo>/tree/<rev>), and files
(HEAD/GET /<repo>/resolve/<rev>/<path>) with X-Repo-Commit, ETag and Content-Length (a Range read answered 206);
a missing file is a 404 with X-Error-Code: EntryNotFound, a missing repository RepoNotFound, as the hub answers.
Every revision name resolves to the repository's one commit (a hash of its files). Every request is logged on
stderr and kept in Hub.requests as (method, path, status): the tests count weight downloads there. With
--token-env VAR every repository is private, as on the hub: a request without
`Authorization: Bearer <the token in $VAR>` gets a 401 (X-Error-Code: GatedRepo).
"""

from __future__ import annotations

import argparse
import hashlib
import http.server
import hmac
import json
import os
import pathlib
import re
import sys
import urllib.parse

REPO = r"(?P<repo>[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*)"
ROUTES = [
    ("info", re.compile(rf"^/api/models/{REPO}(?:/revision/(?P<rev>[^/]+))?$")),
    ("tree", re.compile(rf"^/api/models/{REPO}/tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?$")),
    ("file", re.compile(rf"^/{REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")),
]


RANGE = re.compile(r"^bytes=(?P<first>\d+)-(?P<last>\d*)$")


class Repository:
    def __init__(self, directory: pathlib.Path, repo_id: str):
        self.dir, self.id = directory, repo_id
        self.files = sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file())
        self.oids = {name: hashlib.sha1(self.path(name).read_bytes()).hexdigest() for name in self.files}  # noqa: S324
        self.sha = hashlib.sha1("".join(f"{n}:{o}" for n, o in self.oids.items()).encode()).hexdigest()  # noqa: S324

    def path(self, name: str) -> pathlib.Path:
        return self.dir / name

    def info(self) -> dict:
        return {
            "id": self.id,
            "modelId": self.id,
            "sha": self.sha,
            "private": False,
            "gated": False,
            "disabled": False,
            "tags": [],
            "siblings": [{"rfilename": name} for name in self.files],
        }

    def tree(self) -> list:
        return [
            {"type": "file", "oid": self.oids[name], "size": self.path(name).stat().st_size, "path": name}
            for name in self.files
        ]


class Hub(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, root: pathlib.Path, token: str | None = None):
        super().__init__(address, Handler)
        self.root = root
        self.token = token
        self.repositories: dict[str, Repository] = {}
        self.requests: list[tuple[str, str, str]] = []

    def downloads(self) -> list[str]:
        """Paths of the files served whole (GET .../resolve/... answered 200, not a 206 range read), in order."""
        return [
            path
            for method, path, status in self.requests
            if method == "GET" and "/resolve/" in path and status == "200"
        ]

    def repository(self, repo_id: str) -> Repository | None:
        directory = self.root / repo_id
        if not directory.is_dir():
            return None
        if repo_id not in self.repositories:
            self.repositories[repo_id] = Repository(directory, repo_id)
        return self.repositories[repo_id]


class Handler(http.server.BaseHTTPRequestHandler):
    server: Hub
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):
        status = str(args[1]) if len(args) > 1 else ""
        self.server.requests.append((self.command, self.path, status))
        sys.stderr.write(f"[hub] {self.command} {self.path} -> {status}\n")

    def do_HEAD(self):
        self.answer(head=True)

    def do_GET(self):
        self.answer(head=False)

    def answer(self, head: bool):
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        if path == "/health":  # the lab's readiness check (not a hub route)
            return self.json(200, {"repositories": len(list(self.server.root.glob("*/*")))}, head)
        for kind, pattern in ROUTES:
            match = pattern.match(path)
            if match:
                repository = self.server.repository(match["repo"])
                if not self.authorized():
                    return self.error(401, "GatedRepo", f"Access to model {match['repo']} is restricted")
                if repository is None:
                    return self.error(404, "RepoNotFound", f"Repository {match['repo']} not found")
                if kind == "file":
                    return self.file(repository, match["path"], head)
                return self.json(200, repository.info() if kind == "info" else repository.tree(), head)
        return self.error(404, "EntryNotFound", f"{path} not found")

    def authorized(self) -> bool:
        if self.server.token is None:
            return True
        expected = f"Bearer {self.server.token}".encode()
        return hmac.compare_digest(self.headers.get("Authorization", "").encode(), expected)

    def file(self, repository: Repository, name: str, head: bool):
        if name not in repository.oids:
            return self.error(404, "EntryNotFound", f"{name} not found in {repository.id}", repository.sha)
        size = repository.path(name).stat().st_size
        data = b"" if head else repository.path(name).read_bytes()
        ranged = RANGE.match(self.headers.get("Range", ""))
        if ranged and not head:  # a partial read (safetensors metadata: the header bytes only), as the hub's CDN
            first, last = int(ranged["first"]), min(int(ranged["last"] or size - 1), size - 1)
            data = data[first : last + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {first}-{first + len(data) - 1}/{size}")
        else:
            self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data) if ranged and not head else size))
        self.send_header("ETag", f'"{repository.oids[name]}"')
        self.send_header("X-Repo-Commit", repository.sha)
        self.end_headers()
        self.wfile.write(data)

    def json(self, status: int, body, head: bool, extra=None):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if not head:
            self.wfile.write(data)

    def error(self, status: int, code: str, message: str, commit: str | None = None):
        extra = {"X-Error-Code": code, "X-Error-Message": message}
        if commit:
            extra["X-Repo-Commit"] = commit
        self.json(status, {"error": message}, self.command == "HEAD", extra)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--root", required=True, type=pathlib.Path, help="directory of <org>/<name> repositories")
    parser.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT (port 0: any free port)")
    parser.add_argument("--token-env", help="environment variable holding the token every request must carry")
    args = parser.parse_args(argv)
    host, port = args.listen.rsplit(":", 1)
    hub = Hub((host, int(port)), args.root, os.environ[args.token_env] if args.token_env else None)
    print(json.dumps({"url": f"http://{host}:{hub.server_address[1]}"}), flush=True)
    hub.serve_forever()


if __name__ == "__main__":
    main()
