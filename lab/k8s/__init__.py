"""Real Kubernetes control plane (Go-built binaries) with kwok-simulated GPU nodes."""
