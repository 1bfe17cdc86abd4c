"""What the lab test (tests/e2e/test_lab.py) and its tier share: `make lab` and `make lab-clean` on an inventory, the
three playbooks of its output, the ledger line lab/ledger.yml prints, the inventory's values (`Lab`), and commands on a
lab node (podman exec)."""

import dataclasses
import functools
import json
import os
import pathlib
import re
import subprocess
import time

from tests.playbooks.ansible_run import BIN, ROOT, ansible_env

LEDGER_PLAY = "PLAY [Lab - the gateway's ledger"
SINGLE = "inventories/lab"
# The lab `make test-e2e` runs (mk/lab.mk's E2E_INVENTORY; `make test-e2e-single`: inventories/lab).
E2E_INVENTORY = os.environ.get("TF_E2E_INVENTORY", "inventories/lab-pair")
# The inventory's values the lab tests read, by name: the expression the controller templates for each.
LAB_VALUES = {
    **{name: name for name in (
        "tf_cluster_name", "tf_endpoint_hostname", "tf_served_model_name", "tf_model_deployment", "tf_namespace",
        "tf_lab_tls_dir", "tf_api_key_dir", "tf_lab_tenant", "tf_api_key_name", "tf_validate_requests")},
    "tf_lab_simulated_dcgm_exporter": "hostvars[groups['spark_nodes'][0]].tf_lab_simulated_dcgm_exporter",
    # The pair's only (None on a single node).
    **{name: f"{name} | default(none)" for name in ("tf_lab_link", "connectx_link_cidr", "connectx_mtu")},
}  # fmt: skip


def make(target, inventory=SINGLE):
    """`make <target>` for the lab of `inventory` (mk/lab.mk's LAB_INVENTORY); returns (stdout, seconds)."""
    started = time.monotonic()
    proc = subprocess.run(
        ["make", "--no-print-directory", target, *([] if inventory == SINGLE else [f"LAB_INVENTORY={inventory}"])],
        cwd=ROOT,
        env=ansible_env({"ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_NOCOLOR": "1"}),
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    assert proc.returncode == 0, f"make {target} failed:\n{proc.stdout[-8000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout, time.monotonic() - started


def parts(output, inventory=SINGLE):
    """The three playbooks of `make lab`: hosts (lab/hosts.yml), product (site), ledger (lab/ledger.yml)."""
    hosts, rest = output.split(f"=== the product: ansible-playbook -i {inventory} tokenfactory.spark.site")
    product, ledger_part = rest.split(LEDGER_PLAY)
    return {"hosts": hosts, "product": product, "ledger": ledger_part}


def ledger(output):
    """lab/ledger.yml's line: (requests, prompt, completion, cost, engine prompt, engine generation) - the ledger of
    tenant lab beside the token counters summed over every engine pod."""
    text = " ".join(output.split())
    match = re.search(
        r"Ledger for tenant lab: (\d+) requests, (\d+) prompt \+ (\d+) completion tokens, cost ([0-9.]+) USD\. "
        r"Engine pods (.+?): (\d+) prompt \+ (\d+) generation tokens",
        text,
    )
    assert match, "no ledger summary printed"
    return int(match[1]), int(match[2]), int(match[3]), float(match[4]), int(match[6]), int(match[7])


def inventory_values(inventory, expressions):
    """{expression: value} for the controller, templated as the lab's playbooks see them (variable names, or
    expressions such as groups['workers'][0])."""
    expression = "{{ [" + ", ".join(expressions) + "] }}"
    proc = subprocess.run(
        [
            BIN / "ansible",
            "-i",
            ROOT / inventory,
            "localhost",
            "-m",
            "ansible.builtin.debug",
            "-a",
            f"msg={expression}",
        ],
        cwd=ROOT,
        env=ansible_env({"ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"}),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    values = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]["msg"]
    return dict(zip(expressions, values, strict=True))


@dataclasses.dataclass(frozen=True)
class Lab:
    """A lab inventory: its nodes (the control plane first), their management addresses, and LAB_VALUES by name."""

    inventory: str
    nodes: tuple
    addresses: dict
    values: dict

    @property
    def name(self):
        return pathlib.Path(self.inventory).name

    @property
    def control_plane(self):
        return self.nodes[0]

    @property
    def is_pair(self):
        return len(self.nodes) > 1

    def key_file(self, name=None):
        return pathlib.Path(self.values["tf_api_key_dir"], self.values["tf_lab_tenant"],
                            f"{name or self.values['tf_api_key_name']}.key")  # fmt: skip

    @property
    def ca_file(self):
        return pathlib.Path(self.values["tf_lab_tls_dir"], "ca.crt")


@functools.cache
def lab(inventory=E2E_INVENTORY):
    """The Lab of `inventory`, read once (one ansible call)."""
    nodes = "groups['control_plane'] + groups['workers']"
    addresses = f"({nodes}) | map('extract', hostvars, 'ansible_host') | list"
    read = inventory_values(inventory, (*LAB_VALUES.values(), nodes, addresses))
    names = tuple(read[nodes])
    values = {name: read[expression] for name, expression in LAB_VALUES.items()}
    return Lab(inventory, names, dict(zip(names, read[addresses], strict=True)), values)


def on_node(node, *argv, stdin=None, timeout=60):
    """The stdout of `argv` run on the lab node `node` (podman exec; `stdin` fed to it when given)."""
    interactive = [] if stdin is None else ["-i"]
    return subprocess.run(
        ["podman", "exec", *interactive, node, *argv],
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout,
    ).stdout


def kubectl(node, *args, stdin=None):
    """kubectl with the admin kubeconfig on the lab node `node` (the control plane)."""
    return on_node(node, "kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf", *args, stdin=stdin)


def on_node_get(node, url):
    """GET from the lab node `node` (pod addresses are reachable there, not from this machine)."""
    script = "import sys, urllib.request as u; sys.stdout.write(u.urlopen(sys.argv[1], timeout=10).read().decode())"
    return on_node(node, "python3", "-c", script, url)


def engine_pods(node, namespace, deployment):
    """The pods of the ModelDeployment `deployment`, read on `node`."""
    pods = json.loads(kubectl(node, "-n", namespace, "get", "pods", "-o", "json"))["items"]
    return [p for p in pods if p["metadata"]["labels"].get("tokenfactory.io/model-deployment") == deployment]


def pod_token_counters(node, pod):
    """(vllm:prompt_tokens_total, vllm:generation_tokens_total) of an engine pod, from its /metrics on `node`."""
    port = pod["spec"]["containers"][0]["ports"][0]["containerPort"]
    text = on_node_get(node, f"http://{pod['status']['podIP']}:{port}/metrics")

    def total(name):
        return int(sum(float(v) for v in re.findall(rf"(?m)^vllm:{name}_total\{{[^}}]*\}} (\S+)$", text)))

    return total("prompt_tokens"), total("generation_tokens")
