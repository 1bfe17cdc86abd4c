# The lab: README command 1. `make lab` rehearses bare hosts to validated endpoint on this machine;
# a second run is fast and changes nothing; `make lab-clean` stops and removes everything it started.
.PHONY: lab lab-clean test-e2e
TEST_TIERS += test-e2e
LAB_INVENTORY := inventories/lab/hosts.yml
# Build steps of the pieces the lab runs (each cached; added as the pieces exist).
LAB_PREREQS := $(if $(wildcard mk/k8s-lab.mk),lab-bins) $(if $(wildcard mk/engine.mk),engine) \
  $(if $(wildcard mk/hosts.mk),host-image) $(if $(wildcard mk/observability.mk),prometheus)

## Run the lab (prints what is simulated first, the summary and report paths last).
lab: bootstrap $(LAB_PREREQS)
	@start=$$(date +%s); \
	ANSIBLE_CALLBACKS_ENABLED=tokenfactory.spark.validation_report ANSIBLE_SHOW_CUSTOM_STATS=true \
	TOKENFACTORY_VALIDATION_REPORT_DIR=$(ROOT)/reports/lab TOKENFACTORY_VALIDATION_REPORT_NAME=lab \
	  ansible-playbook -i $(LAB_INVENTORY) lab/site.yml; \
	echo "lab: done in $$(( $$(date +%s) - start )) s"

## Stop every lab process and remove its state.
lab-clean: bootstrap
	ansible-playbook -i $(LAB_INVENTORY) lab/clean.yml

## The lab as its own test (marker e2e): cold run, then a warm run that must change nothing.
test-e2e: bootstrap $(LAB_PREREQS)
	$(PYTEST) -m e2e -p no:cacheprovider -rP tests/e2e
