# Token Factory modules against the lab's real control plane (tests/modules, marker lab).
.PHONY: test-modules
SERVICE_TIERS += test-modules

## Modules, bad inputs, capacity, paired-Spark placement, serve.yml and the playbooks/roles tests that need an API server
## (tests/playbooks, marker lab) against kube-apiserver + kwok nodes.
test-modules: bootstrap lab-bins
	$(PYTEST) -m lab -p no:cacheprovider tests/modules tests/playbooks
