# The lab: README command 1. `make lab` = the podman Spark host(s) with a SIMULATED GPU (lab/hosts.yml), then the
# product unchanged: ansible-playbook -i inventories/lab tokenfactory.spark.site (kubeadm, bridge CNI, gateway,
# PostgreSQL, Redis, Prometheus and the CPU vLLM engine as pods, tenant and key, validation over HTTPS through the
# Endpoint), then the ledger beside the engine's own counters (lab/ledger.yml). A second run changes nothing.
# `make lab LAB_INVENTORY=inventories/lab-pair`: the same on two podman Sparks cabled by the SIMULATED CX-7 link.
.PHONY: lab lab-clean test-e2e test-e2e-single test-rehearsal test-rehearsal-pair
CLUSTER_TIERS += test-e2e test-rehearsal
LAB_INVENTORY := inventories/lab
# reports/<inventory name>/<inventory name>.{json,xml,html} (the inventories' tf_lab_reports, which lab-clean removes).
LAB_NAME = $(notdir $(patsubst %/,%,$(LAB_INVENTORY)))
# The cached pieces the lab needs: Kubernetes binaries and node images, the kubelet host image, the service images
# and the CPU vLLM engine image (each returns in seconds once built).
LAB_PREREQS := lab-bins node-images node-host-image service-images engine-image
LAB_ENV := ANSIBLE_CALLBACKS_ENABLED=tokenfactory.spark.progress,tokenfactory.spark.validation_report,ansible.posix.timer ANSIBLE_SHOW_CUSTOM_STATS=true \
  TOKENFACTORY_VALIDATION_REPORT_DIR=$(ROOT)/reports/$(LAB_NAME) TOKENFACTORY_VALIDATION_REPORT_NAME=$(LAB_NAME)

## Run the lab (prints what is simulated first, the validation summary, report paths and ledger last).
lab: bootstrap $(LAB_PREREQS)
	@start=$$(date +%s); \
	ansible-playbook -i $(LAB_INVENTORY) lab/hosts.yml; \
	echo "=== the product: ansible-playbook -i $(LAB_INVENTORY) tokenfactory.spark.site"; \
	$(LAB_ENV) ansible-playbook -i $(LAB_INVENTORY) tokenfactory.spark.site; \
	ansible-playbook -i $(LAB_INVENTORY) lab/ledger.yml; \
	echo "lab: done in $$(( $$(date +%s) - start )) s"

## Remove the lab's hosts, volumes, hub, /etc/hosts line and state.
lab-clean: bootstrap
	ansible-playbook -i $(LAB_INVENTORY) lab/clean.yml

# The lab test-e2e runs (in the clusters lane): the pair. Its checks are written for any number of nodes, so the pair
# answers the single node's and its own (the link, a replica per Spark, a new replica count applied with kubectl);
# inventories/lab-pair links the single lab's settings. The shipped single node is test-rehearsal's.
E2E_INVENTORY ?= inventories/lab-pair
## The lab as its own test (marker e2e) on E2E_INVENTORY: lab-clean, cold run, warm run (the product playbook must
## change nothing), the checks (GitOps: a new engine argument applied with kubectl, and on the pair a new replica
## count), lab-clean. The checks only a pair has skip on one node, naming why.
test-e2e: bootstrap $(LAB_PREREQS)
	TF_E2E_INVENTORY=$(E2E_INVENTORY) $(PYTEST) -m e2e -p no:cacheprovider -rA tests/e2e

## The same checks on the single lab (inventories/lab; the pair's own skip, naming why).
test-e2e-single:
	$(MAKE) --no-print-directory test-e2e E2E_INVENTORY=inventories/lab

## The SHIPPED inventories/spark-single end to end on a podman Spark host (marker rehearsal): only the overlay
## tests/rehearsal/spark-single (address, user, vault from the example, simulation layer) on top; validate PASS over
## HTTPS with the site CA the collection created, then a second run that changes nothing.
test-rehearsal: bootstrap $(LAB_PREREQS)
	$(PYTEST) -m rehearsal -p no:cacheprovider -rA tests/rehearsal

## The SHIPPED inventories/spark-pair the same way on two podman Spark hosts cabled by the SIMULATED CX-7 link (marker
## rehearsal_pair; overlay tests/rehearsal/spark-pair): the second joins over the link, one engine replica per Spark,
## validate PASS over HTTPS, the Endpoint on both management addresses, pod-to-pod bytes on the link, changed=0.
test-rehearsal-pair: bootstrap $(LAB_PREREQS)
	$(PYTEST) -m rehearsal_pair -p no:cacheprovider -rA tests/rehearsal
