# Host roles: cached Debian systemd images for podman, Molecule scenarios, preflight negative tests.
.PHONY: host-image host-image-arm64 node-host-image node-images node-images-upgrade-from e2e-images test-molecule \
  molecule-default molecule-arm64 test-host-roles test-cni
# The kubelet scenario and the arm64 podman host in the clusters lane (the podman lane: one cluster at a time); the
# preflight hosts and the cni role (an API server, no kubelet) beside the other services.
CLUSTER_TIERS += molecule-default molecule-arm64
SERVICE_TIERS += test-host-roles test-cni
MOLECULE_TEST = ANSIBLE_FORCE_COLOR=0 PY_COLORS=0 NO_COLOR=1 molecule test -s $*

## Build (or reuse) localhost/tf-debian:bookworm (rebuilt only when the recipe changes).
host-image: bootstrap
	$(BUILD_LOCK) nice -n 10 scripts/build-host-image amd64

## The aarch64 variant localhost/tf-debian:bookworm-arm64 (debootstrap through qemu-user; slow, cached).
host-image-arm64: bootstrap
	$(BUILD_LOCK) nice -n 10 scripts/build-host-image arm64

## localhost/tf-node:bookworm: the host that runs a real kubelet (tf-debian + iptables + LAB ONLY boot fixes).
node-host-image: bootstrap
	$(BUILD_LOCK) nice -n 10 scripts/build-host-image node

## The images a kubeadm v1.36.3 node runs, built offline as OCI archives ($TF_CACHE/k8s-v1.36.3/images).
node-images: bootstrap
	$(BUILD_LOCK) nice -n 10 scripts/build-node-images

## The upstream conformance suite (e2e.test, agnhost) and its test images, built offline ($TF_CACHE/k8s-v1.36.3/e2e-*).
e2e-images: bootstrap
	$(BUILD_LOCK) nice -n 10 scripts/build-e2e-images

# Static pattern rules: make skips implicit-rule search for .PHONY targets, so plain `molecule-%` never ran.
# default runs the pair of real kubelets: the node host image and the node images (which build what they need). It
# comes up at UPGRADE_FROM_KUBE_VERSION and is upgraded to node-images' version in its side effect, the health gate
# reading a real Prometheus, then runs a focused subset of the upstream conformance suite on the upgraded cluster
# (molecule/default/tests/test_conformance.py).
molecule-default: molecule-%: node-host-image node-images node-images-upgrade-from prometheus e2e-images
	$(MOLECULE_TEST)
UPGRADE_FROM_KUBE_VERSION ?= v$(call tf_pinned,kubernetes_upgrade_from)
## The same images and binaries for UPGRADE_FROM_KUBE_VERSION ($TF_CACHE/k8s-v1.36.2, 1.1 GB; cold 844 s, then cached).
node-images-upgrade-from: bootstrap
	$(BUILD_LOCK) env KUBE_VERSION=$(UPGRADE_FROM_KUBE_VERSION) nice -n 10 scripts/build-node-images
molecule-arm64: molecule-%: host-image-arm64
	$(MOLECULE_TEST)

## Preflight failure cases against real podman hosts (pytest driving ansible-playbook).
test-host-roles: host-image
	$(PYTEST) -m molecule -p no:cacheprovider -n 2 tests/host_roles

## The cni role against the lab's real kube-apiserver (kwok nodes), kubeadm-config written by the real kubeadm.
test-cni: bootstrap lab-bins
	$(PYTEST) -m lab -p no:cacheprovider tests/host_roles

# Measured in the warm `make test` of 2026-12-07 (nothing else running): default 866 s (the pair brought up, upgraded,
# verified with the conformance subset, a node removed, reset; the single node and the pair it replaced took 638 s
# and 768 s in the run before), arm64 250 s (qemu-user), host roles 193 s, cni 165 s.
test-molecule: molecule-default molecule-arm64 test-host-roles test-cni
