"""The client's connection options through public seams (k8s/auth.py): kubeconfig errors that name the option and
the path (a dict kubeconfig stays masked), the request timeout on a real socket that never answers, and the
options, environment variables and impersonation headers a real HTTP server receives."""

import http.server
import json
import re
import socket
import threading
import time
from typing import ClassVar

import pytest

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s import auth
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import NODE, K8sError, KubeClient
from tests.modules.lab_helpers import run_module


def test_a_missing_kubeconfig_names_the_option_and_the_path(tmp_path):
    missing = tmp_path / "nowhere" / "kubeconfig"
    result = run_module("model_info", missing, namespace="default")
    assert result["failed"]
    assert f"option kubeconfig: {missing}: no such file" in result["msg"], result["msg"]
    assert "********" not in result["msg"]


def test_a_kubeconfig_from_the_environment_says_so(tmp_path, monkeypatch):
    missing = tmp_path / "env-kubeconfig"
    monkeypatch.setenv("K8S_AUTH_KUBECONFIG", str(missing))
    with pytest.raises(
        K8sError, match=re.escape(f"option kubeconfig (from K8S_AUTH_KUBECONFIG): {missing}: no such file")
    ):
        KubeClient({}, field_manager="test")


def test_a_kubeconfig_given_as_a_dict_stays_masked():
    token = "sekrit-token-0123456789"
    broken = {"apiVersion": "v1", "kind": "Config", "users": [{"name": "u", "user": {"token": token}}]}
    result = run_module("model_info", "unused", kubeconfig=broken, namespace="default")
    assert result["failed"] and "the kubeconfig given as a dict" in result["msg"], result["msg"]
    assert token not in json.dumps(result)


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every GET with an empty list and records the headers it got."""

    seen: ClassVar[list] = []

    def do_GET(self):
        Recorder.seen.append((self.path, self.headers))
        body = b'{"items": []}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def recorder():
    Recorder.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_options_and_impersonation_reach_the_server(recorder):
    params = {"host": recorder + "/", "api_key": "t0ken", "impersonate_user": "jane", "impersonate_groups": ["a", "b"]}
    assert KubeClient(params, field_manager="test").list(NODE) == []
    path, headers = Recorder.seen[-1]
    assert path == "/api/v1/nodes"
    assert headers["Authorization"] == "Bearer t0ken"
    assert headers["Impersonate-User"] == "jane"
    assert headers.get_all("Impersonate-Group") == ["a", "b"]


def test_environment_variables_fill_unset_options(recorder, monkeypatch):
    monkeypatch.setenv("K8S_AUTH_HOST", recorder)
    monkeypatch.setenv("K8S_AUTH_API_KEY", "from-env")
    monkeypatch.setenv("K8S_AUTH_IMPERSONATE_GROUPS", "x,y")
    monkeypatch.setenv("K8S_AUTH_VERIFY_SSL", "no")  # the client's own name for validate_certs
    options = auth.auth_options({})
    assert options == {
        "host": recorder,
        "api_key": "from-env",
        "impersonate_groups": ["x", "y"],
        "validate_certs": False,
    }
    KubeClient({}, field_manager="test").list(NODE)
    assert Recorder.seen[-1][1].get_all("Impersonate-Group") == ["x", "y"]


def test_each_request_waits_at_most_request_timeout():
    silent = socket.create_server(("127.0.0.1", 0))  # accepts connections (backlog), never answers
    try:
        params = {"host": f"http://127.0.0.1:{silent.getsockname()[1]}", "api_key": "t", "request_timeout": 1}
        client = KubeClient(params, field_manager="test")
        started = time.monotonic()
        with pytest.raises(K8sError, match="cannot reach the API server") as failed:
            client.list(NODE)
        assert failed.value.status == 0
        assert 0.9 <= time.monotonic() - started < 5
    finally:
        silent.close()


def test_proxy_headers_are_what_urllib3_makes_of_them():
    import urllib3

    options = {"proxy_basic_auth": "user:pa ss", "basic_auth": "a:b", "user_agent": "tf/1"}
    assert auth.proxy_headers(**options) == urllib3.util.make_headers(**options)
    assert auth.proxy_headers(user_agent="tf/1") == urllib3.util.make_headers(user_agent="tf/1")
