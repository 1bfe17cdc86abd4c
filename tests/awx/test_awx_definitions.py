"""AWX as code: every definition is valid for the awx.awx module that applies it, and consistent with the project."""

import pathlib
import re

import ansible_collections.kubernetes.core as kubernetes_core
import pytest
import yaml
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory import inventory

from tests.awx.definitions import (
    AWX,
    ROOT,
    awx_file,
    check_against_spec,
    load,
    module_options,
    playbook_closure,
    survey,
)

JOB_TEMPLATES = awx_file("job_templates.yml")["job_templates"]
WORKFLOWS = awx_file("workflows.yml")["workflows"]
CREDENTIAL_TYPES = awx_file("credential_types.yml")["credential_types"]
CREDENTIALS = awx_file("credentials.yml")["credentials"]
OWN_KEYS = {"survey", "inputs_var"}  # read by awx/configure.yml, not module options
SURVEY_TYPES = {"text", "textarea", "password", "integer", "float", "multiplechoice", "multiselect"}


def params(entry):
    return {k: v for k, v in entry.items() if k not in OWN_KEYS}


@pytest.mark.parametrize(
    ("module", "entries"),
    [
        ("job_template", JOB_TEMPLATES),
        ("workflow_job_template", WORKFLOWS),
        ("credential_type", CREDENTIAL_TYPES),
        ("credential", CREDENTIALS),
    ],
)
def test_definitions_are_valid_module_parameters(module, entries):
    problems = [p for e in entries for p in check_against_spec(params(e), module_options(module), e["name"])]
    assert not problems, problems


def test_checker_catches_bad_parameters():
    bad = {"name": "x", "playbok": "typo.yml", "ask_limit_on_launch": "yes"}
    problems = check_against_spec(bad, module_options("job_template"), "t")
    assert any("playbok: not an option" in p for p in problems)
    assert any("ask_limit_on_launch: expected bool" in p for p in problems)


def configure_item_keys():
    """item.<key> references per looped variable in awx/configure.yml."""
    keys = {}
    for task in yaml.safe_load((AWX / "configure.yml").read_text())[0]["tasks"]:
        loop = task.get("loop", "")
        match = re.search(r"\{\{\s*(\w+)\s*\}\}", str(loop))
        if match:
            keys[match.group(1)] = set(re.findall(r"item\.(\w+)", str(task)))
    return keys


@pytest.mark.parametrize(
    ("var", "entries"),
    [
        ("job_templates", JOB_TEMPLATES),
        ("workflows", WORKFLOWS),
        ("credential_types", CREDENTIAL_TYPES),
        ("credentials", CREDENTIALS),
    ],
)
def test_configure_playbook_applies_every_defined_field(var, entries):
    used = configure_item_keys()[var]
    for entry in entries:
        assert set(entry) <= used, f"{entry['name']}: fields {set(entry) - used} are silently ignored by configure.yml"


@pytest.mark.parametrize("template", JOB_TEMPLATES, ids=lambda t: t["name"])
def test_template_playbook_and_survey_exist(template):
    assert (ROOT / template["playbook"]).is_file(), f"{template['playbook']} does not exist"
    assert (AWX / "surveys" / template["survey"]).is_file()


def all_surveys():
    return sorted(p.name for p in (AWX / "surveys").glob("*.yml"))


@pytest.mark.parametrize("name", all_surveys())
def test_survey_spec_is_well_formed(name):
    spec = survey(name)
    assert spec["name"] and spec["description"] and spec["spec"]
    variables = [q["variable"] for q in spec["spec"]]
    assert len(variables) == len(set(variables)), f"duplicate variables in {name}"
    for q in spec["spec"]:
        assert re.fullmatch(r"[a-z_][a-z0-9_]*", q["variable"]), q
        assert q["type"] in SURVEY_TYPES, q
        assert q["question_name"] and isinstance(q["required"], bool), q
        if q["type"] in {"multiplechoice", "multiselect"}:
            assert q["choices"] and all(isinstance(c, str) for c in q["choices"]), q
            assert q.get("default", "") in [*q["choices"], ""], q
        if q["type"] == "integer":
            assert q["min"] <= q["default"] <= q["max"] or q["default"] == "", q
        if q["type"] in {"text", "textarea", "password"} and q.get("default"):
            assert q["min"] <= len(q["default"]) <= q["max"], q
    used_by = {t["survey"] for t in JOB_TEMPLATES} | {w["survey"] for w in WORKFLOWS}
    assert name in used_by, f"survey {name} is attached to no template"


@pytest.mark.parametrize("template", JOB_TEMPLATES, ids=lambda t: t["name"])
def test_every_survey_variable_is_used_by_the_playbook(template):
    text = playbook_closure(ROOT / template["playbook"])
    unused = [q["variable"] for q in survey(template["survey"])["spec"] if not re.search(rf"\b{q['variable']}\b", text)]
    assert not unused, f"{template['playbook']} never reads {unused}"


def topological_order(edges):
    """Node identifiers children-first; fails on a cycle."""
    order, visiting = [], set()

    def visit(ident):
        assert ident not in visiting, f"cycle through {ident}"
        if ident in order:
            return
        visiting.add(ident)
        for child in edges[ident]:
            visit(child)
        visiting.discard(ident)
        order.append(ident)

    for ident in edges:
        visit(ident)
    return order


def test_topological_order_detects_cycles():
    assert topological_order({"a": ["b"], "b": []}) == ["b", "a"]
    with pytest.raises(AssertionError, match="cycle"):
        topological_order({"a": ["b"], "b": ["a"]})


def test_workflow_graph_and_survey():
    names = {t["name"]: t for t in JOB_TEMPLATES}
    for workflow in WORKFLOWS:
        nodes = {n["identifier"]: n for n in workflow["workflow_nodes"]}
        assert len(nodes) == len(workflow["workflow_nodes"])
        edges = {}
        for ident, node in nodes.items():
            assert node["unified_job_template"]["name"] in names, node
            children = [c["identifier"] for kind in node.get("related", {}).values() for c in kind]
            assert set(children) <= set(nodes), f"{ident} points to unknown nodes"
            edges[ident] = children
        assert sorted(topological_order(edges)) == sorted(nodes)
        playbooks = [names[n["unified_job_template"]["name"]]["playbook"] for n in nodes.values()]
        text = "\n".join(playbook_closure(ROOT / p) for p in playbooks)
        unused = [
            q["variable"] for q in survey(workflow["survey"])["spec"] if not re.search(rf"\b{q['variable']}\b", text)
        ]
        assert not unused, f"workflow survey variables used by no node: {unused}"


def test_credentials_and_types_are_consistent():
    custom = {t["name"]: t for t in CREDENTIAL_TYPES}
    defined = {c["name"]: c for c in CREDENTIALS}
    for cred in CREDENTIALS:
        assert cred["credential_type"] in {*custom, "Machine"}, cred
    for template in JOB_TEMPLATES:
        assert set(template["credentials"]) <= set(defined), template["name"]
    for ctype in CREDENTIAL_TYPES:
        fields = {f["id"] for f in ctype["inputs"]["fields"]}
        assert set(ctype["inputs"].get("required", [])) <= fields
        files = {k.removeprefix("template.") for k in ctype["injectors"].get("file", {})}
        for section in ctype["injectors"].values():
            for value in section.values():
                for ref in re.findall(r"\{\{\s*([\w.]+)\s*\}\}", value):
                    ok = ref in fields or (ref.startswith("tower.filename.") and ref.split(".")[-1] in files)
                    assert ok, f"{ctype['name']}: injector references undefined {ref}"
        secrets = {f["id"] for f in ctype["inputs"]["fields"] if f.get("secret")}
        assert secrets, f"{ctype['name']} has no secret field"


def surveys_asking(variable):
    names = {t["survey"] for t in JOB_TEMPLATES} | {w["survey"] for w in WORKFLOWS}
    return [q for name in sorted(names) for q in survey(name)["spec"] if q["variable"] == variable]


def test_gpu_type_choices_are_the_gpus_the_collection_knows():
    questions = surveys_asking("tf_gpu_type")
    assert len(questions) >= 2, "serve and the workflow ask for the GPU type"
    for question in questions:
        assert question["type"] == "multiplechoice"
        assert set(question["choices"]) == set(inventory.MEMORY_BANDWIDTH_GBPS), question


@pytest.mark.parametrize(
    ("variable", "surveys"),
    [
        ("tf_model_source", ("serve.yml", "workflow.yml")),
        ("tf_gpu_type", ("serve.yml", "workflow.yml")),
        ("tf_api_key_tenant", ("tenants.yml", "workflow.yml")),
    ],
)
def test_serve_tenants_and_workflow_surveys_cover_the_users_choices(variable, surveys):
    for name in surveys:
        assert variable in {q["variable"] for q in survey(name)["spec"]}, f"{name} does not ask for {variable}"


def test_the_survey_tenant_reaches_tenants_yml_only_through_tf_gateway_tenants():
    """One tenant path: no survey variable of the serve template creates tenants; the tenants template's tenant is
    the one-item default of tf_gateway_tenants, and every template gets the key directory on the state directory."""
    assert "tf_api_key_tenant" not in {q["variable"] for q in survey("serve.yml")["spec"]}
    tenants_yml = (ROOT / "playbooks/tenants.yml").read_text()
    assert "tf_api_key_tenant" not in tenants_yml and "tf_gateway_tenants" in tenants_yml
    defaults = load(ROOT / "roles/settings/defaults/main.yml")
    assert "tf_api_key_tenant" in defaults["tf_gateway_tenants"]
    assert 'tf_api_key_dir: "{{ awx_state_dir }}/api-keys"' in (AWX / "configure.yml").read_text()


def env_readers():
    """Text of everything that reads environment variables in a job: this collection's plugins and kubernetes.core."""
    roots = [ROOT / "plugins", pathlib.Path(next(iter(kubernetes_core.__path__))) / "plugins" / "module_utils"]
    return "\n".join(p.read_text() for root in roots for p in root.rglob("*.py"))


def test_every_injected_variable_is_read():
    """Extra vars a credential injects are read by a playbook that attaches it (or any day-2 playbook when it is
    attached at launch); environment variables by a module's env fallback."""
    playbooks = "\n".join(playbook_closure(ROOT / t["playbook"]) for t in JOB_TEMPLATES)
    readers = env_readers()
    for ctype in CREDENTIAL_TYPES:
        for var in ctype["injectors"].get("extra_vars", {}):
            assert re.search(rf"\b{var}\b", playbooks), f"{ctype['name']} injects {var} that no playbook reads"
        for var in ctype["injectors"].get("env", {}):
            fallback = rf'env_fallback,\s*\[[^\]]*"{var}"'
            assert re.search(fallback, readers), f"{ctype['name']} injects {var} that no module reads"


def test_gateway_admin_credential_goes_with_the_playbook_that_calls_the_admin_api():
    for template in JOB_TEMPLATES:
        calls_admin_api = re.search(r"tokenfactory\.spark\.(tenant|api_key|usage_info):", playbook_closure(
            ROOT / template["playbook"]))  # fmt: skip
        assert ("Token Factory gateway admin" in template["credentials"]) == bool(calls_admin_api), template["name"]


def test_no_template_needs_a_kubeconfig_credential_and_provision_hands_one_on():
    """The kubeconfig is a file on the state directory: provision creates it, so it cannot require it."""
    for template in JOB_TEMPLATES:
        assert "Token Factory kubeconfig" not in template["credentials"], template["name"]
    cluster = yaml.safe_load((ROOT / "playbooks/cluster.yml").read_text())
    handover = cluster[-1]
    assert handover["tags"] == ["always"]
    stats = next(t["ansible.builtin.set_stats"] for t in handover["tasks"] if "ansible.builtin.set_stats" in t)
    assert stats["data"]["tf_kubeconfig"] == "{{ tf_kubeconfig }}" and stats["per_host"] is False
    for workflow in WORKFLOWS:
        # A workflow survey variable would win over the artifact in every node.
        assert "tf_kubeconfig" not in {q["variable"] for q in survey(workflow["survey"])["spec"]}


def test_inventories_put_the_kubeconfig_on_the_state_directory_under_awx():
    for name in ("spark-single", "spark-pair"):
        value = yaml.safe_load((ROOT / f"inventories/{name}/group_vars/all/cluster.yml").read_text())["tf_kubeconfig"]
        assert value.startswith("{{ tf_kubeconfig_dir | default("), name
    configure = (AWX / "configure.yml").read_text()
    assert 'tf_kubeconfig_dir: "{{ awx_state_dir }}"' in configure
    assert "AWX_ISOLATION_SHOW_PATHS" in configure


@pytest.mark.parametrize("path", sorted((AWX / "examples").glob("*-answers.yml")), ids=lambda p: p.name)
def test_example_answers_answer_their_survey(path):
    questions = {q["variable"]: q for q in survey(path.name.removesuffix("-answers.yml") + ".yml")["spec"]}
    answers = yaml.safe_load(path.read_text())
    assert set(answers) <= set(questions), f"{path.name} answers questions its survey does not ask"
    assert {v for v, q in questions.items() if q["required"]} <= set(answers), f"{path.name} misses required answers"
    for variable, value in answers.items():
        question = questions[variable]
        assert isinstance(value, int if question["type"] == "integer" else str), variable
        assert question["type"] != "multiplechoice" or value in question["choices"], variable
