# Real Kubernetes control plane for tests: Go-built binaries (cached under $TF_CACHE) + kwok nodes.
.PHONY: lab-bins test-lab
SERVICE_TIERS += test-lab

## Build (or reuse) etcd, kube-apiserver/controller-manager/scheduler, kubectl, kwok, kwokctl.
lab-bins:
	$(BUILD_LOCK) nice -n 10 scripts/build-k8s-lab-bins

## Smoke suite against a real apiserver with simulated DGX Spark nodes (module tests run in test-modules).
test-lab: bootstrap lab-bins
	$(PYTEST) -m lab -p no:cacheprovider tests/lab
