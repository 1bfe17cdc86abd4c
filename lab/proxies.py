"""Real HTTP proxies on loopback for client tests: a CONNECT forward proxy, and a reverse proxy in front of the
lab API server that answers chosen requests with an error first (fault injection for retry tests).

    with ConnectProxy() as proxy:            # proxy.url; proxy.tunnels lists the host:port of each CONNECT
    with FaultProxy(cluster, faults=[429, 503]) as front:   # front.url (plain http); front.seen: statuses sent
"""

import contextlib
import http.client
import http.server
import select
import socket
import socketserver
import ssl
import threading

from lab.processes import free_port


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Running:
    """Start the server in a thread on enter, shut it down on exit."""

    def __init__(self, handler):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = _Server(("127.0.0.1", self.port), handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()


class _ConnectHandler(http.server.BaseHTTPRequestHandler):
    def do_CONNECT(self):
        host, _colon, port = self.path.rpartition(":")
        self.server.owner.tunnels.append(self.path)
        with socket.create_connection((host, int(port)), timeout=10) as upstream:
            self.send_response(200, "Connection established")
            self.end_headers()
            pipe(self.connection, upstream)

    def log_message(self, *args):
        pass


def pipe(a, b):
    """Copy bytes both ways until one side closes."""
    sockets = [a, b]
    while True:
        readable, _w, _x = select.select(sockets, [], [], 10)
        if not readable:
            return
        for source in readable:
            data = source.recv(65536)
            if not data:
                return
            (b if source is a else a).sendall(data)


class ConnectProxy(_Running):
    """An HTTP forward proxy for HTTPS (CONNECT tunnels); .tunnels: the host:port of every tunnel opened."""

    def __init__(self):
        self.tunnels = []
        super().__init__(_ConnectHandler)


class _FaultHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _relay(self):
        owner = self.server.owner
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with owner.lock:
            fault = owner.faults.pop(0) if owner.faults else None
        if fault is not None:
            owner.seen.append(fault)
            message = b'{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected","code":%d}' % fault
            self.send_response(fault)
            self.send_header("Content-Type", "application/json")
            self.send_header("Retry-After", "0")
            self.send_header("Content-Length", str(len(message)))
            self.end_headers()
            self.wfile.write(message)
            return
        conn = http.client.HTTPSConnection(owner.upstream_host, owner.upstream_port, context=owner.context, timeout=30)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "authorization", "connection")}
        conn.request(self.command, self.path, body=body or None, headers=headers)
        answer = conn.getresponse()
        data = answer.read()
        owner.seen.append(answer.status)
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        conn.close()

    do_GET = do_PATCH = do_POST = do_PUT = do_DELETE = _relay

    def log_message(self, *args):
        pass


class FaultProxy(_Running):
    """Plain HTTP in front of a LabCluster's API server (as its admin); answers the next len(faults) requests with
    those statuses instead of forwarding them. .seen: every status it answered, in order."""

    def __init__(self, cluster, faults=()):
        self.faults, self.seen, self.lock = list(faults), [], threading.Lock()
        pki = cluster.dir / "pki"
        self.context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.context.load_cert_chain(pki / "admin.crt", pki / "admin.key")
        self.upstream_host, _colon, port = cluster.server.removeprefix("https://").rpartition(":")
        self.upstream_port = int(port)
        super().__init__(_FaultHandler)

    def inject(self, *statuses):
        with self.lock:
            self.faults.extend(statuses)

    def __exit__(self, *exc):
        with contextlib.suppress(OSError):
            super().__exit__(*exc)
