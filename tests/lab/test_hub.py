"""The stand-in hub (SIMULATION of the public internet) answers in the Hugging Face hub's layout: repository info
with its commit, the file tree, files with X-Repo-Commit/ETag/Content-Length, and the hub's 404 error codes."""

import hashlib
import json
import threading
import urllib.error
import urllib.request

import pytest

from lab.hub import Hub


@pytest.fixture
def hub(tmp_path):
    repo = tmp_path / "org" / "tiny"
    (repo / "sub").mkdir(parents=True)
    (repo / "config.json").write_text('{"model_type": "qwen2"}')
    (repo / "sub" / "weights.bin").write_bytes(b"\x00" * 1000)
    server = Hub(("127.0.0.1", 0), tmp_path)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def get(url, method="GET"):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=10) as answer:  # noqa: S310
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def test_info_tree_and_files_in_the_hub_layout(hub):
    status, _headers, body = get(f"{hub}/api/models/org/tiny/revision/main")
    info = json.loads(body)
    assert status == 200 and info["id"] == "org/tiny" and len(info["sha"]) == 40
    assert sorted(s["rfilename"] for s in info["siblings"]) == ["config.json", "sub/weights.bin"]
    tree = json.loads(get(f"{hub}/api/models/org/tiny/tree/{info['sha']}?recursive=true")[2])
    assert {(e["path"], e["size"], e["type"]) for e in tree} == {
        ("config.json", 23, "file"),
        ("sub/weights.bin", 1000, "file"),
    }
    status, headers, body = get(f"{hub}/org/tiny/resolve/main/sub/weights.bin", "HEAD")
    assert status == 200 and body == b""
    assert headers["X-Repo-Commit"] == info["sha"] and headers["Content-Length"] == "1000"
    oid = hashlib.sha1(bytes(1000)).hexdigest()  # noqa: S324 - a content id, as the hub's
    assert headers["ETag"] == f'"{oid}"'
    assert get(f"{hub}/org/tiny/resolve/{info['sha']}/sub/weights.bin")[2] == b"\x00" * 1000


def test_missing_files_and_repositories_get_the_hub_error_codes(hub):
    status, headers, _body = get(f"{hub}/org/tiny/resolve/main/vocab.json", "HEAD")
    assert (status, headers["X-Error-Code"]) == (404, "EntryNotFound")
    assert headers["X-Repo-Commit"]  # transformers tells "no such file" from "no such repo" by it
    status, headers, _body = get(f"{hub}/api/models/org/missing")
    assert (status, headers["X-Error-Code"]) == (404, "RepoNotFound")


def test_with_a_token_every_repository_is_private(tmp_path):
    (tmp_path / "org" / "tiny").mkdir(parents=True)
    (tmp_path / "org" / "tiny" / "config.json").write_text("{}")
    server = Hub(("127.0.0.1", 0), tmp_path, token="hub-token")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/org/tiny/resolve/main/config.json"
    try:
        status, headers, _body = get(url)
        assert (status, headers["X-Error-Code"]) == (401, "GatedRepo")
        request = urllib.request.Request(url, headers={"Authorization": "Bearer hub-token"})
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
            assert answer.status == 200 and answer.read() == b"{}"
    finally:
        server.shutdown()


def test_a_range_read_is_partial_and_the_request_log_counts_only_whole_downloads(tmp_path):
    """huggingface_hub reads a safetensors header with a Range GET (vLLM's metadata look): a 206, not a download."""
    (tmp_path / "org" / "tiny").mkdir(parents=True)
    (tmp_path / "org" / "tiny" / "model.safetensors").write_bytes(bytes(range(200)))
    server = Hub(("127.0.0.1", 0), tmp_path)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/org/tiny/resolve/main/model.safetensors"
    try:
        request = urllib.request.Request(url, headers={"Range": "bytes=8-15"})
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
            assert answer.status == 206 and answer.read() == bytes(range(8, 16))
            assert answer.headers["Content-Range"] == "bytes 8-15/200"
        assert server.downloads() == []
        assert get(url)[2] == bytes(range(200))
        assert server.downloads() == ["/org/tiny/resolve/main/model.safetensors"]
        assert [(method, status) for method, _path, status in server.requests] == [("GET", "206"), ("GET", "200")]
    finally:
        server.shutdown()
