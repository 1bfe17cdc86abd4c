"""The lab: everything that starts real components on this machine, for `make lab` and for the tests.

    lab.k8s        Go-built control plane + kwok-simulated GPU nodes (`python -m lab up|down|status`)
    lab.engine     CPU vLLM engine and the tiny local model
    lab.datastores PostgreSQL and Redis from the Debian packages
    lab.services   the stand-in hub, started once and reused (`python -m lab.services`)
    lab.processes  process groups, free ports;  lab.wait  polling;  lab.paths  where things live

Tests import this package; it never imports tests.
"""
