"""Facts about the machine a measurement runs on: CPU, memory probes, a memory cgroup as a smaller host, the run
record, and what the machine has installed for the course. Standard library only (``doctor`` runs before set-up)."""
