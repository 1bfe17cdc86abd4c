"""Tests of the lab control plane launcher (lab.k8s) and its smoke suite (marker `lab`)."""
