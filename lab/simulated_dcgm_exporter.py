"""SIMULATED DCGM exporter: serves DCGM exposition text from a file instead of reading a GPU.

    python -m lab.simulated_dcgm_exporter --port 19400 --file lab/fixtures/dcgm/gb10-healthy.prom [--hostname N]
The file is re-read on every scrape, so a test changes the GPU's state by rewriting it (lab/fixtures/dcgm/README.md
says where the texts come from). --hostname sets the `Hostname` label as dcgm-exporter does on a node (the
recordings say spark-01). Only the hardware is simulated: Prometheus, the alert rules and the health gate that read
these series are the real ones. The lab runs it as a pod (lab/files/simulated-dcgm-exporter.yml.j2).
"""

import argparse
import contextlib
import http.server
import pathlib
import re
import sys

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def handler_for(path, hostname=None):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            try:
                body = pathlib.Path(path).read_bytes()
                if hostname:
                    body = re.sub(rb'Hostname="[^"]*"', b'Hostname="' + hostname.encode() + b'"', body)
            except OSError as exc:
                self.send_error(503, f"cannot read {path}: {exc}")
                return
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    return Handler


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m lab.simulated_dcgm_exporter")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--file", required=True, help="DCGM exposition text to serve at /metrics")
    parser.add_argument("--hostname", help="value of the Hostname label (default: as recorded)")
    args = parser.parse_args(argv)
    server = http.server.ThreadingHTTPServer((args.host, args.port), handler_for(args.file, args.hostname))
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
