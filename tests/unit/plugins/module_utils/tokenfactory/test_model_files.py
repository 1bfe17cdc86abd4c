"""Reading a model's files through its Provider (model_files), against the stand-in hub (lab/hub.py)."""

import json
import struct
import threading

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory import model_files as mf

from lab.hub import Hub
from lab.processes import free_port

TOKEN = "hf_unit_test_secret"


def safetensors(tensors):
    header = json.dumps({"__metadata__": {"format": "pt"}, **tensors}).encode()
    return struct.pack("<Q", len(header)) + header + b"\x00" * 64


@pytest.fixture
def hub_root(tmp_path):
    repo = tmp_path / "org" / "made-up"
    repo.mkdir(parents=True)
    (repo / "config.json").write_text('{"num_hidden_layers": 3}')
    (repo / "broken.json").write_text("{not json")
    (repo / "model.safetensors").write_bytes(
        safetensors({"w": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]}})
    )
    return tmp_path


def serve(root, token=None):
    server = Hub(("127.0.0.1", 0), root, token)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def hub(hub_root):
    server, url = serve(hub_root)
    yield url
    server.shutdown()


def test_file_layouts_per_provider_type():
    assert mf.file_base("huggingface", "org/m") == "https://huggingface.co/org/m/resolve/main/"
    assert mf.file_base("huggingface", "org/m", "refs/pr/1", "http://mirror:8080/") == (
        "http://mirror:8080/org/m/resolve/refs%2Fpr%2F1/"
    )
    assert mf.file_base("ngc", "nim/meta/llama:1.5", None, "http://m") == "http://m/nim/meta/llama/resolve/1.5/"
    assert mf.file_base("s3", "s3://bucket/models/m") == "https://bucket.s3.amazonaws.com/models/m/"
    assert mf.file_base("s3", "s3://bucket/models/m/", url="http://minio:9000") == "http://minio:9000/bucket/models/m/"
    with pytest.raises(mf.UnsupportedSource, match="set the Provider url"):
        mf.file_base("ngc", "nim/meta/llama")


def test_reads_json_and_only_the_safetensors_header(hub):
    files = mf.ModelFiles(mf.file_base("huggingface", "org/made-up", url=hub))
    assert files.json("config.json") == {"num_hidden_layers": 3}
    header = files.safetensors_header("model.safetensors")
    assert header["w"]["shape"] == [4, 4]


def test_answered_errors_name_the_url_and_the_reason(hub):
    files = mf.ModelFiles(mf.file_base("huggingface", "org/made-up", url=hub))
    with pytest.raises(mf.FetchError) as missing:
        files.json("model.safetensors.index.json")
    assert (missing.value.status, missing.value.answered) == (404, True)
    assert str(missing.value) == (
        f"{hub}/org/made-up/resolve/main/model.safetensors.index.json: "
        "HTTP 404 EntryNotFound: not found (check source and revision)"
    )
    with pytest.raises(mf.FetchError, match=r"broken\.json: is not valid JSON"):
        files.json("broken.json")
    with pytest.raises(mf.FetchError, match="not a safetensors file"):
        files.safetensors_header("config.json")


def test_an_unreachable_provider_is_not_an_answer():
    files = mf.ModelFiles(f"http://127.0.0.1:{free_port()}/org/m/resolve/main/", timeout=5)
    with pytest.raises(mf.FetchError, match="not reachable") as caught:
        files.json("config.json")
    assert caught.value.answered is False


def test_the_token_is_sent_as_bearer_and_a_refusal_says_which(hub_root):
    server, url = serve(hub_root, token=TOKEN)
    try:
        base = mf.file_base("huggingface", "org/made-up", url=url)
        assert mf.ModelFiles(base, TOKEN).json("config.json") == {"num_hidden_layers": 3}
        with pytest.raises(mf.FetchError, match="HTTP 401 GatedRepo: the Provider's token is missing") as missing:
            mf.ModelFiles(base).json("config.json")
        with pytest.raises(mf.FetchError, match="HTTP 401 GatedRepo: the Provider's token was refused") as refused:
            mf.ModelFiles(base, "wrong").json("config.json")
        for error in (missing, refused):
            assert error.value.answered and TOKEN not in str(error.value)
    finally:
        server.shutdown()


def test_a_redirect_to_another_host_gets_no_credential():
    """The hub redirects large files to a CDN: the token must stay with the hub's host."""
    import http.server

    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            seen.append((self.headers["Host"].split(":")[0], self.headers.get("Authorization")))
            if self.path.startswith("/hop"):
                port = self.server.server_address[1]
                self.send_response(302)
                self.send_header("Location", f"http://localhost:{port}/cdn/config.json")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = b'{"ok": true}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        files = mf.ModelFiles(f"http://127.0.0.1:{server.server_address[1]}/hop/", TOKEN)
        assert files.json("config.json") == {"ok": True}
    finally:
        server.shutdown()
    assert seen == [("127.0.0.1", f"Bearer {TOKEN}"), ("localhost", None)]
