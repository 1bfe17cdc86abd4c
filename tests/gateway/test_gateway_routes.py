"""The wider OpenAI API through the gateway: embeddings and responses metered, any other /v1 route refused."""

import openai
import pytest

from lab.wait import wait_until
from tests.gateway.gateway import deployment_objects

pytestmark = pytest.mark.gateway
MODEL = "tiny-qwen2"


def ledger(gw, route):
    query = "SELECT status, prompt_tokens, completion_tokens, cost FROM usage_records WHERE route = '%s'"
    return gw.sql(query % route)  # the tests' own route names


def test_embeddings_are_metered_by_their_prompt_tokens(gateway_factory, upstream):
    gw = gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url))
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key=gw.create_key("acme"), max_retries=0)
    answer = client.embeddings.create(model=MODEL, input=["one two three", "four five"])
    assert len(answer.data) == 2 and len(answer.data[1].embedding) == 8
    assert answer.usage.prompt_tokens == 5
    # 5 x 0.15 per 1M
    wait_until(lambda: ledger(gw, "/v1/embeddings") == "200|5|0|0.00000075", 10, "the embeddings ledger row")


def test_responses_are_metered_by_input_and_output_tokens(gateway_factory, upstream):
    gw = gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url))
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key=gw.create_key("acme"), max_retries=0)
    answer = client.responses.create(model=MODEL, input="say three words", max_output_tokens=3)
    assert answer.usage.input_tokens == 3 and answer.usage.output_tokens == 3
    wait_until(lambda: ledger(gw, "/v1/responses").startswith("200|3|3|"), 10, "the responses ledger row")
    with pytest.raises(openai.BadRequestError) as caught:  # its event stream's usage is not metered: refused
        client.responses.create(model=MODEL, input="hello", stream=True)
    assert caught.value.body["param"] == "stream"
    assert gw.sql("SELECT count(*) FROM usage_records") == "1"


@pytest.mark.parametrize(("method", "path"), [("POST", "/v1/audio/speech"), ("GET", "/v1/files"),
                                              ("POST", "/v1/moderations")])  # fmt: skip
def test_any_other_route_is_refused_with_an_openai_404_and_never_forwarded(gateway_factory, upstream, method, path):
    gw = gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url))
    key = gw.create_key("acme")
    status, answer = gw.replicas[0].request(method, path, {"model": MODEL, "input": "x"}, key)
    assert status == 404, answer
    assert answer["error"]["code"] == "unknown_route" and "POST /v1/embeddings" in answer["error"]["message"]
    assert upstream.generation_requests == 0
    status, answer = gw.replicas[0].request(method, path, {"model": MODEL}, "tfk-not-a-key")
    assert status == 401, "the route list is not shown to a caller without a valid key"


def test_a_served_route_with_another_method_is_still_405(gateway_factory, upstream):
    gw = gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url))
    status, answer = gw.replicas[0].request("GET", "/v1/embeddings", None, gw.create_key("acme"))
    assert status == 405 and answer["error"]["code"] == "method_not_allowed", answer
