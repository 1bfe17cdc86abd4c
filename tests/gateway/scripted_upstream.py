"""A scripted OpenAI-shaped upstream for tests that need an engine that misbehaves on purpose (a test double).

`ScriptedUpstream(usage=...)` answers every generation request with one token and the given `usage` object
(for example negative or absurd counts), streamed or not, and records the Cookie header of each request.
"""

from __future__ import annotations

import http.server
import json
import threading


class ScriptedUpstream(http.server.ThreadingHTTPServer):
    def __init__(self, usage=None, set_cookie=False):
        self.usage = usage if usage is not None else {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        self.set_cookie = set_cookie
        self.cookies_seen: list[str | None] = []
        self.bodies: list[dict] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                outer.cookies_seen.append(self.headers.get("Cookie"))
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.bodies.append(body)
                if body.get("stream"):
                    self._stream()
                else:
                    self._json()

            def _headers(self, content_type, length=None):
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                if length is None:
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.send_header("Content-Length", str(length))
                if outer.set_cookie:
                    self.send_header("Set-Cookie", f"session=tenant-secret-{len(outer.cookies_seen)}; Path=/")
                self.end_headers()

            def _json(self):
                message = {"role": "assistant", "content": " alpha"}
                data = json.dumps({"id": "x", "object": "chat.completion", "model": "m", "usage": outer.usage,
                                   "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})  # fmt: skip
                self._headers("application/json", len(data))
                self.wfile.write(data.encode())

            def _stream(self):
                self._headers("text/event-stream")
                choice = {"index": 0, "delta": {"content": " alpha"}, "finish_reason": "stop"}
                token = {"id": "x", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}
                final = {"id": "x", "object": "chat.completion.chunk", "model": "m", "choices": [],
                         "usage": outer.usage}  # fmt: skip
                for event in (json.dumps(token), json.dumps(final), "[DONE]"):
                    data = f"data: {event}\n\n".encode()
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def url(self, host="127.0.0.1") -> str:
        return f"http://{host}:{self.server_address[1]}"

    def close(self) -> None:
        self.shutdown()
        self.server_close()
