"""Provider.spec.url reaches every engine the way each reads it: HF_ENDPOINT for a Hugging Face mirror (or the
lab's stand-in hub), AWS_ENDPOINT_URL for an S3 endpoint; never settable through the env option."""

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import ValidationError
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.deployment import deployment_spec
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import render
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.planner import plan_deployment

from tests.unit.plugins.module_utils.tokenfactory.samples import QWEN_05B, md_params
from tests.unit.plugins.module_utils.tokenfactory.test_golden import S3_MODEL, SINGLE

HUB = {"spec": {"type": "huggingface", "url": "http://hub.lab.internal:18600"}}
S3 = {"spec": {"type": "s3", "url": "https://minio.example:9000", "credentialsSecret": {"name": "s3", "key": "k"}}}


def env_of(engine, provider, model=QWEN_05B):
    spec = deployment_spec(md_params(engine=engine))
    plan = plan_deployment(spec, model, SINGLE, [], name="qwen")
    md = {
        "apiVersion": "tokenfactory.io/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "qwen", "namespace": "tf", "uid": "1"},
        "spec": spec,
    }
    body = render(md, model, provider, plan)[0]
    if engine == "dynamo":
        return body["spec"]["services"]["VllmWorker"]["envs"]
    return body["spec"]["template"]["spec"]["containers"][0]["env"]


@pytest.mark.parametrize("engine", ["vllm", "dynamo"])
def test_a_hugging_face_mirror_url_becomes_hf_endpoint(engine):
    assert {"name": "HF_ENDPOINT", "value": "http://hub.lab.internal:18600"} in env_of(engine, HUB)
    assert not [e for e in env_of(engine, {"spec": {"type": "huggingface"}}) if e["name"] == "HF_ENDPOINT"]


def test_an_s3_endpoint_url_becomes_aws_endpoint_url_next_to_the_credential():
    env = {e["name"]: e for e in env_of("vllm", S3, S3_MODEL)}
    assert env["AWS_ENDPOINT_URL"] == {"name": "AWS_ENDPOINT_URL", "value": "https://minio.example:9000"}
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"] == {"secretKeyRef": {"name": "s3", "key": "k"}}


@pytest.mark.parametrize("name", ["HF_ENDPOINT", "AWS_ENDPOINT_URL"])
def test_the_provider_url_cannot_be_overridden_through_env(name):
    with pytest.raises(ValidationError, match=f"env.{name}"):
        deployment_spec(md_params(env={name: "http://elsewhere"}))
