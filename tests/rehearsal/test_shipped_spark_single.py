"""The SHIPPED inventories/spark-single, rehearsed end to end on a podman Spark host (make test-rehearsal): only the
overlay tests/rehearsal/spark-single on top (tests/rehearsal/shipped.py). Ends in validate PASS over HTTPS with the
site CA the collection created, calls from curl-like and openai-SDK clients, and a second run that changes nothing."""

import json
import ssl
import urllib.error
import urllib.request

import openai
import pytest

from tests.playbooks.ansible_run import play_recap
from tests.rehearsal.shipped import Shipped, assert_second_run_changes_nothing, assert_validated_over_https, rehearse

pytestmark = [pytest.mark.rehearsal, pytest.mark.slow, pytest.mark.timeout(5400)]
SHIPPED = Shipped("spark-single")
NODE = SHIPPED.control_plane
NODE_IP = SHIPPED.addresses[NODE]


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    yield from rehearse(SHIPPED, tmp_path_factory)


def test_the_simulation_boundary_is_printed(rehearsal):
    assert "SIMULATED: GPU and its driver" in rehearsal["hosts"]
    assert "SIMULATION of the public internet" in rehearsal["hosts"]


def test_cold_run_ends_in_validate_pass_over_https_naming_the_site_ca(rehearsal):
    assert play_recap(rehearsal["cold"])[NODE]["failed"] == 0
    assert_validated_over_https(SHIPPED, rehearsal)


def test_second_run_changes_nothing(rehearsal):
    assert_second_run_changes_nothing(rehearsal)


def test_the_created_ca_and_key_file_serve_a_tenant_with_curl_and_the_openai_sdk(rehearsal):
    key_file = rehearsal["key_file"]
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    key = key_file.read_text().strip()
    assert key not in rehearsal["cold"] + rehearsal["warm"], "the key value must never be printed"
    context = ssl.create_default_context(cafile=str(rehearsal["ca"]))
    request = urllib.request.Request(f"https://{NODE_IP}/v1/models", headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request, context=context, timeout=30) as answer:  # noqa: S310 - https
        assert [m["id"] for m in json.load(answer)["data"]] == [SHIPPED.model]
    client = openai.OpenAI(
        base_url=f"https://{NODE_IP}/v1",
        api_key=key,
        http_client=openai.DefaultHttpxClient(verify=str(rehearsal["ca"])),
    )
    reply = client.chat.completions.create(
        model=SHIPPED.model, messages=[{"role": "user", "content": "Hi"}], max_tokens=8
    )
    assert reply.usage.completion_tokens > 0


def test_admin_api_only_on_the_admin_node_port(rehearsal):
    context = ssl.create_default_context(cafile=str(rehearsal["ca"]))
    token = rehearsal["admin_token"]
    public = urllib.request.Request(f"https://{NODE_IP}/admin/v1/tenants", headers={"Authorization": f"Bearer {token}"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(public, context=context, timeout=30)  # noqa: S310 - https
    assert refused.value.code == 404
    admin = urllib.request.Request(
        f"http://{NODE_IP}:{SHIPPED.admin_node_port}/admin/v1/tenants", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(admin, timeout=30) as answer:  # noqa: S310 - the management address
        assert SHIPPED.tenant in {t["name"] for t in json.load(answer)["data"]}
    assert token not in rehearsal["cold"] + rehearsal["warm"]
