# Host roles: cached Debian systemd images for podman, Molecule scenarios, preflight negative tests.
.PHONY: host-image host-image-arm64 test-molecule molecule-default molecule-pair molecule-arm64 test-host-roles test-cni
TEST_TIERS += test-molecule
MOLECULE_TEST = ANSIBLE_FORCE_COLOR=0 PY_COLORS=0 NO_COLOR=1 molecule test -s $*

## Build (or reuse) localhost/tf-debian:bookworm (rebuilt only when the recipe changes).
host-image: bootstrap
	nice -n 10 scripts/build-host-image amd64

## The aarch64 variant localhost/tf-debian:bookworm-arm64 (debootstrap through qemu-user; slow, cached).
host-image-arm64: bootstrap
	nice -n 10 scripts/build-host-image arm64

# Static pattern rules: make skips implicit-rule search for .PHONY targets, so plain `molecule-%` never ran.
molecule-default molecule-pair: molecule-%: host-image
	$(MOLECULE_TEST)
molecule-arm64: molecule-%: host-image-arm64
	$(MOLECULE_TEST)

## Preflight failure cases against real podman hosts (pytest driving ansible-playbook).
test-host-roles: host-image
	$(PYTEST) -m molecule -p no:cacheprovider -n 2 tests/host_roles

## The cni role against the lab's real kube-apiserver (kwok nodes), kubeadm-config written by the real kubeadm.
test-cni: bootstrap lab-bins
	$(PYTEST) -m lab -p no:cacheprovider tests/host_roles

# Measured here one by one (2 shared cores, load 6-11): default 4.7 min, pair 3.8, arm64 7.7 (qemu-user), host roles 4.0,
# cni 2.4.
test-molecule: molecule-default molecule-pair molecule-arm64 test-host-roles test-cni
# The default scenario installs the Go-built kubeadm/kubelet/kubectl with the kubernetes role.
molecule-default: lab-bins
