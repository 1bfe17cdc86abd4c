.PHONY: lab lab-clean
## README command 1: the main job on the embedded lab.
lab: bootstrap
	ansible-playbook -i inventories/lab/hosts.yml playbooks/lab.yml
lab-clean:
	@echo "nothing to clean yet"
