"""The API server's service proxy path of a Service URL (what validate.yml's metrics go through)."""

import pytest

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.service_proxy import (
    is_service_url,
    service_proxy_path,
)


@pytest.mark.parametrize(
    ("url", "path"),
    [
        (
            "http://qwen.tokenfactory.svc:8000/metrics",
            "/api/v1/namespaces/tokenfactory/services/qwen:8000/proxy/metrics",
        ),
        ("http://qwen.tf.svc.cluster.local:8000/metrics", "/api/v1/namespaces/tf/services/qwen:8000/proxy/metrics"),
        ("https://qwen.tf.svc/metrics", "/api/v1/namespaces/tf/services/https:qwen:443/proxy/metrics"),
        ("http://qwen.tf.svc:8000", "/api/v1/namespaces/tf/services/qwen:8000/proxy/"),
        ("http://qwen.tf.svc:8000/metrics?x=1", "/api/v1/namespaces/tf/services/qwen:8000/proxy/metrics?x=1"),
    ],
)
def test_service_urls_map_to_the_proxy_path(url, path):
    assert is_service_url(url)
    assert service_proxy_path(url) == path


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8000/metrics", "http://qwen.tf:8000/metrics", "ftp://qwen.tf.svc/metrics", "http://Q_.tf.svc/m"],
)
def test_other_urls_are_refused_naming_the_form(url):
    assert not is_service_url(url)
    with pytest.raises(ValueError, match=r"is not a cluster Service URL \(http\(s\)://NAME.NAMESPACE.svc"):
        service_proxy_path(url)
