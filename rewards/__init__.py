"""Datasets, reward-model jobs, evaluation and the dashboard; ``rewards.training``, ``rewards.evaluation`` and the
sampler below it run on nodes without Django."""
import os

# PyTorch's OpenMP threads spin while they wait for each other. On a shared CPU (web server, both worker queues,
# a trainer and a scorer on two cores) a spinning thread whose partner has been descheduled makes every operation
# wait out a time slice: SmolLM2 sampled 2 × 24 tokens in 67–78 s instead of 5.5 s beside one busy core (measured
# with both settings, 2 threads). Passive waiting has no such cliff. Every node entry point (``python -m
# rewards.…``), the web process and the workers import this package before torch; an operator's own value wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
