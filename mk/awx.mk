# AWX jobs through ansible-runner that need services (tests/awx; the rest of tests/awx runs in `make unit`).
.PHONY: test-awx
SERVICE_TIERS += test-awx

## The serve template's API key step against a real gateway, and provision -> serve -> validate against the lab
## API server and a real gateway (needs `make lab-bins`, cached).
test-awx: gateway-deps lab-bins
	$(PYTEST) -m "gateway or lab" -p no:cacheprovider tests/awx
