# Host roles: cached Debian systemd images for podman, Molecule scenarios, preflight negative tests.
.PHONY: host-image host-image-arm64 node-host-image node-images node-images-upgrade-from e2e-images test-molecule \
  molecule-default molecule-pair molecule-upgrade molecule-arm64 test-host-roles test-cni
TEST_TIERS += test-molecule
MOLECULE_TEST = ANSIBLE_FORCE_COLOR=0 PY_COLORS=0 NO_COLOR=1 molecule test -s $*

## Build (or reuse) localhost/tf-debian:bookworm (rebuilt only when the recipe changes).
host-image: bootstrap
	nice -n 10 scripts/build-host-image amd64

## The aarch64 variant localhost/tf-debian:bookworm-arm64 (debootstrap through qemu-user; slow, cached).
host-image-arm64: bootstrap
	nice -n 10 scripts/build-host-image arm64

## localhost/tf-node:bookworm: the host that runs a real kubelet (tf-debian + iptables + LAB ONLY boot fixes).
node-host-image: bootstrap
	nice -n 10 scripts/build-host-image node

## The images a kubeadm v1.36.3 node runs, built offline as OCI archives ($TF_CACHE/k8s-v1.36.3/images).
node-images: bootstrap
	nice -n 10 scripts/build-node-images

## The upstream conformance suite (e2e.test, agnhost) and its test images, built offline ($TF_CACHE/k8s-v1.36.3/e2e-*).
e2e-images: bootstrap
	nice -n 10 scripts/build-e2e-images

# Static pattern rules: make skips implicit-rule search for .PHONY targets, so plain `molecule-%` never ran.
# default and pair run real kubelets: the node host image and the node images (which build what they need).
# default also runs a focused subset of the upstream conformance suite (molecule/default/tests/test_conformance.py).
molecule-default molecule-pair: molecule-%: node-host-image node-images
	$(MOLECULE_TEST)
# molecule-upgrade starts a node at this earlier patch and upgrades it to node-images' version (both cached).
UPGRADE_FROM_KUBE_VERSION ?= v$(call tf_pinned,kubernetes_upgrade_from)
## The same images and binaries for UPGRADE_FROM_KUBE_VERSION ($TF_CACHE/k8s-v1.36.2, 1.1 GB; cold 844 s, then cached).
node-images-upgrade-from: bootstrap
	KUBE_VERSION=$(UPGRADE_FROM_KUBE_VERSION) nice -n 10 scripts/build-node-images
molecule-upgrade: molecule-%: node-host-image node-images node-images-upgrade-from prometheus
	$(MOLECULE_TEST)
molecule-default: e2e-images
# pair comes up at UPGRADE_FROM_KUBE_VERSION too and is upgraded in its side effect, the health gate reading Prometheus.
molecule-pair: node-images-upgrade-from prometheus
molecule-arm64: molecule-%: host-image-arm64
	$(MOLECULE_TEST)

## Preflight failure cases against real podman hosts (pytest driving ansible-playbook).
test-host-roles: host-image
	$(PYTEST) -m molecule -p no:cacheprovider -n 2 tests/host_roles

## The cni role against the lab's real kube-apiserver (kwok nodes), kubeadm-config written by the real kubeadm.
test-cni: bootstrap lab-bins
	$(PYTEST) -m lab -p no:cacheprovider tests/host_roles

# Measured here one by one (2 shared cores, load 6-11): default 4.7 min, pair 10.5 (two kubelets, upgraded to v1.36.3
# in the side effect, load 3-5; 5.5 before the upgrade joined it at load 0-3), arm64 7.7 (qemu-user), host roles 4.0,
# cni 2.4, upgrade 12.0 (load 12-14; bring-up 5.4, upgrade 4.4, second run 0.3).
test-molecule: molecule-default molecule-pair molecule-upgrade molecule-arm64 test-host-roles test-cni
