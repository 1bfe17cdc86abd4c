"""The status keeper keeps the gateway's copy of the Endpoint's TLS Secret in step with it (tls_copy.py), without a
cluster: a renewed Secret is copied (tls.crt and tls.key, server-side apply onto the copy's version), an equal one
writes nothing, an Endpoint without TLS, a missing copy or source and a source that is not kubernetes.io/tls are left
alone with one log line per reason, an API error is counted and the pass goes on, and no key or certificate is ever
logged."""

import base64
import copy
import logging

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import K8sError

from tokenfactory_status_keeper.__main__ import arguments, keeper
from tokenfactory_status_keeper.keeper import Keeper
from tokenfactory_status_keeper.tls_copy import TlsCopy, parse_ref, redact

from tests.modules.lab_helpers import self_signed
from tests.status_keeper.test_status_keeper_units import counts, ready_cluster

NS, GW = "tokenfactory", "tokenfactory-system"
ENDPOINT, SOURCE, COPY = (NS, "public"), (NS, "public-tls"), (GW, "tokenfactory-gateway-tls")
LOGGER = "tokenfactory.status_keeper"


def b64(text):
    return base64.b64encode(text.encode()).decode()


def tls_secret(ref, cert, key, rv="1", kind="kubernetes.io/tls"):
    data = {"tls.crt": b64(cert), "tls.key": b64(key)}
    return {"metadata": {"namespace": ref[0], "name": ref[1], "resourceVersion": rv}, "type": kind, "data": data}


class Secrets:
    """The part of KubeClient a TlsCopy uses: get of the Endpoint and of Secrets, a server-side apply of a Secret
    (a new resourceVersion; 409 when the body names another one); `forbidden` names answer 403."""

    def __init__(self, cert, key, tls=True):
        spec = {"hostname": "llm.example.com", "tls": {"secretName": SOURCE[1]}} if tls else {}
        self.objects = {
            ("Endpoint", *ENDPOINT): {"metadata": {"namespace": NS, "name": "public"}, "spec": spec},
            ("Secret", *SOURCE): tls_secret(SOURCE, cert, key, rv="7"),
            ("Secret", *COPY): tls_secret(COPY, cert, key, rv="3"),
        }
        self.applied, self.forbidden = [], set()

    def get(self, rtype, name, namespace=None):
        if (rtype.kind, namespace, name) in self.forbidden:
            raise K8sError(403, f'secrets "{name}" is forbidden: User "system:serviceaccount:gw:keeper" cannot get')
        found = self.objects.get((rtype.kind, namespace, name))
        return copy.deepcopy(found)

    def apply(self, body, dry_run=False, subresource=None, conflict=True):
        assert body["kind"] == "Secret" and subresource is None and conflict is False and not dry_run
        self.applied.append(copy.deepcopy(body))
        meta = body["metadata"]
        stored = self.objects[("Secret", meta["namespace"], meta["name"])]
        if meta["resourceVersion"] != stored["metadata"]["resourceVersion"]:
            raise K8sError(409, "the object has been modified", "Conflict")
        stored["data"] = {**stored["data"], **body["data"]}
        stored["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1)
        return copy.deepcopy(stored)

    def renew(self, cert, key):
        """As cert-manager renews it: the source Secret's data replaced in place."""
        source = self.objects[("Secret", *SOURCE)]
        source["data"] = {"tls.crt": b64(cert), "tls.key": b64(key)}
        source["metadata"]["resourceVersion"] = str(int(source["metadata"]["resourceVersion"]) + 1)

    def data(self, ref):
        return self.objects[("Secret", *ref)]["data"]


@pytest.fixture
def pems():
    """Two certificate and key pairs: the one copied, the renewed one."""
    return self_signed("llm.example.com"), self_signed("llm.example.com")


def secret_text(*pairs):
    """Every secret string of the pairs, as PEM lines and as stored (base64): none may appear in a log."""
    texts = []
    for cert, key in pairs:
        texts += [b64(cert)[:40], b64(key)[:40], b64(key)[-40:], *key.splitlines()[1:-1], *cert.splitlines()[1:-1]]
    return texts


def test_a_renewed_secret_is_copied_onto_the_version_compared_then_nothing_is_written(pems, caplog):
    (cert, key), (new_cert, new_key) = pems
    cluster = Secrets(cert, key)
    tls = TlsCopy(cluster, ENDPOINT, COPY)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert tls.keep() == "unchanged" and cluster.applied == []
        cluster.renew(new_cert, new_key)
        assert tls.keep() == "written"
        assert tls.keep() == "unchanged"
    assert cluster.data(COPY) == cluster.data(SOURCE) == {"tls.crt": b64(new_cert), "tls.key": b64(new_key)}
    (body,) = cluster.applied
    assert body == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": COPY[1], "namespace": GW, "resourceVersion": "3"},
        "data": {"tls.crt": b64(new_cert), "tls.key": b64(new_key)},
    }, "only the two keys, onto the copy's version it compared"
    assert caplog.messages == [
        "Endpoint tokenfactory/public: TLS Secret tokenfactory/public-tls changed; "
        "copied into tokenfactory-system/tokenfactory-gateway-tls"
    ]
    assert not [text for text in secret_text(*pems) if text in caplog.text]


def test_a_renewed_key_alone_is_copied_too(pems):
    (cert, key), (_cert, new_key) = pems
    cluster = Secrets(cert, key)
    cluster.renew(cert, new_key)
    assert TlsCopy(cluster, ENDPOINT, COPY).keep() == "written"
    assert cluster.data(COPY)["tls.key"] == b64(new_key)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda c: c.objects.pop(("Endpoint", *ENDPOINT)), "the Endpoint does not exist"),
        (
            lambda c: c.objects[("Endpoint", *ENDPOINT)]["spec"].pop("tls"),
            "the Endpoint has no TLS (spec.tls.secretName)",
        ),
        (
            lambda c: c.objects.pop(("Secret", *COPY)),
            "the gateway's copy tokenfactory-system/tokenfactory-gateway-tls does not exist"
            " (the gateway role creates it)",
        ),
        (lambda c: c.objects.pop(("Secret", *SOURCE)), "its TLS Secret tokenfactory/public-tls does not exist"),
        (
            lambda c: c.objects[("Secret", *SOURCE)].update(type="Opaque"),
            "its TLS Secret tokenfactory/public-tls is not of type kubernetes.io/tls",
        ),
    ],
    ids=["no-endpoint", "no-tls", "copy-missing", "source-missing", "not-tls"],
)
def test_what_cannot_be_kept_is_left_alone_and_said_once(pems, caplog, change, why):
    (cert, key), (new_cert, new_key) = pems
    cluster = Secrets(cert, key)
    cluster.renew(new_cert, new_key)
    change(cluster)
    tls = TlsCopy(cluster, ENDPOINT, COPY)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert [tls.keep(), tls.keep()] == ["skipped", "skipped"]
    assert cluster.applied == []
    assert caplog.messages == [f"Endpoint tokenfactory/public: TLS copy not kept: {why}"]
    if ("Secret", *COPY) in cluster.objects:
        assert cluster.data(COPY) == {"tls.crt": b64(cert), "tls.key": b64(key)}, "the copy is not touched"


def test_a_copy_changed_since_it_was_read_is_written_at_the_next_pass(pems):
    (cert, key), (new_cert, new_key) = pems
    cluster = Secrets(cert, key)
    cluster.renew(new_cert, new_key)
    got = cluster.get

    def read_then_changed(rtype, name, namespace=None):
        found = got(rtype, name, namespace)
        if (namespace, name) == COPY:  # the role writes it between the keeper's read and its write
            cluster.objects[("Secret", *COPY)]["metadata"]["resourceVersion"] = "4"
        return found

    cluster.get = read_then_changed
    tls = TlsCopy(cluster, ENDPOINT, COPY)
    assert tls.keep() == "conflicts"
    cluster.get = got
    assert tls.keep() == "written" and cluster.data(COPY)["tls.crt"] == b64(new_cert)


def test_a_forbidden_read_is_an_error_of_the_pass_which_goes_on(pems, caplog):
    (cert, key), (new_cert, new_key) = pems
    cluster = Secrets(cert, key)
    cluster.renew(new_cert, new_key)
    cluster.forbidden.add(("Secret", *SOURCE))
    status_cluster, _plan = ready_cluster()
    kept = Keeper(status_cluster, tls_copy=TlsCopy(cluster, ENDPOINT, COPY))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert kept.run_pass() == counts(checked=3, errors=1, unchanged=2)
        assert kept.run_pass() == counts(checked=3, errors=1, unchanged=2)
    assert cluster.applied == []
    (message,) = caplog.messages  # said once while it stays the same
    assert message.startswith('Endpoint tokenfactory/public: TLS copy not kept: API error 403: secrets "public-tls"')
    cluster.forbidden.clear()
    assert kept.run_pass() == counts(checked=3, written=1, unchanged=2)
    assert kept.run_pass() == counts(checked=3, unchanged=3)


def test_an_api_error_that_echoes_the_data_is_logged_without_it(pems, caplog):
    (cert, key), (new_cert, new_key) = pems
    cluster = Secrets(cert, key)
    cluster.renew(new_cert, new_key)

    def refused(body, **options):
        raise K8sError(422, f"Secret is invalid: data[tls.key]: {body['data']['tls.key']} ({new_key})", "Invalid")

    cluster.apply = refused
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert TlsCopy(cluster, ENDPOINT, COPY).keep() == "errors"
    assert "API error 422: Secret is invalid: data[tls.key]: <redacted>" in caplog.text
    assert not [text for text in secret_text(*pems) if text in caplog.text]


def test_the_status_pass_counts_are_unchanged_without_a_tls_copy():
    status_cluster, _plan = ready_cluster()
    assert Keeper(status_cluster).run_pass() == counts(unchanged=2)


def test_redact_leaves_other_text_alone():
    data = {"tls.crt": b64("-----BEGIN X-----\nABCDEFGHIJKLMNOPQRSTUVWX\n-----END X-----\n")}
    assert redact(f"a {data['tls.crt']} b ABCDEFGHIJKLMNOPQRSTUVWX c", data) == "a <redacted> b <redacted> c"
    assert redact("forbidden", {}) == "forbidden"


def test_the_command_line_configures_the_copy_from_the_environment_or_flags(monkeypatch, capsys):
    for variable in ("TF_STATUS_KEEPER_ENDPOINT", "TF_STATUS_KEEPER_TLS_COPY"):
        monkeypatch.delenv(variable, raising=False)
    assert keeper(object(), arguments([])).tls_copy is None, "absent: no TLS keeping, as before"
    monkeypatch.setenv("TF_STATUS_KEEPER_ENDPOINT", "tokenfactory/public")
    monkeypatch.setenv("TF_STATUS_KEEPER_TLS_COPY", "tokenfactory-system/tokenfactory-gateway-tls")
    tls = keeper(object(), arguments(["--namespace", NS])).tls_copy
    assert (tls.endpoint, tls.copy) == (ENDPOINT, COPY)
    tls = keeper(object(), arguments(["--endpoint", "other/ep", "--tls-copy", "gw/copy"])).tls_copy
    assert (tls.endpoint, tls.copy) == (("other", "ep"), ("gw", "copy"))

    monkeypatch.delenv("TF_STATUS_KEEPER_TLS_COPY")
    with pytest.raises(SystemExit) as alone:
        arguments([])
    assert alone.value.code == 2 and "--endpoint and --tls-copy" in capsys.readouterr().err
    with pytest.raises(SystemExit) as bad:
        arguments(["--tls-copy", "no-namespace"])
    assert bad.value.code == 2 and "'no-namespace' is not <namespace>/<name>" in capsys.readouterr().err
    assert parse_ref("a/b") == ("a", "b")
    for value in ("", "a/", "/b", "a/b/c"):
        with pytest.raises(ValueError):
            parse_ref(value)
