# Host roles: cached Debian systemd images for podman, Molecule scenarios, preflight negative tests.
.PHONY: host-image test-molecule molecule-default molecule-pair molecule-arm64 test-host-roles
TEST_TIERS += test-molecule
MOLECULE_ENV := ANSIBLE_FORCE_COLOR=0 PY_COLORS=0 NO_COLOR=1

## Build (or reuse) localhost/tf-debian:bookworm and :bookworm-arm64 (rebuilt only when the recipe changes).
host-image: bootstrap
	nice -n 10 scripts/build-host-image amd64 arm64

molecule-%: host-image
	$(MOLECULE_ENV) molecule test -s $*

## Preflight failure cases against real podman hosts (pytest driving ansible-playbook).
test-host-roles: host-image
	$(PYTEST) -m molecule -p no:cacheprovider tests/host_roles

test-molecule: molecule-default molecule-pair molecule-arm64 test-host-roles
