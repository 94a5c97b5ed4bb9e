"""Where a job's commands run: a local subprocess, a Slurm batch job, or a Kubernetes Job.

One small interface (``submit``, ``poll``, ``cancel``) over one artefact: the script of ``common.script_body``,
whose exit-status protocol every backend reads alike (``common``); one module per backend (``local``, ``slurm``,
``kubernetes``). The rest of the code imports from this package, which names them all.

What runs for real in the tests: ``LocalBackend`` (Celery worker → subprocess) and ``SlurmBackend`` (a
single-node Slurm started by ``scripts/slurm-local``). No Kubernetes API server can run here, so
``KubernetesBackend`` is tested on its manifest (validated against the Kubernetes JSON schema) and its
kubectl command lines (its ``runner`` is replaced by a recorder in tests).
"""
from __future__ import annotations

from .common import (
    EXIT_FILE,
    SCRIPT_NAME,
    STDERR_FILE,
    STDOUT_FILE,
    BackendError,
    Launch,
    Launcher,
    PollResult,
    Runner,
    count_lines,
    job_environment,
    python_command,
    read_exit_code,
    script_body,
    summary_line,
    tail,
)
from .kubernetes import KubernetesBackend, secret_name
from .local import LocalBackend, _group_runs
from .slurm import SLURM_STATES, SlurmBackend, SlurmRecord, parse_sacct, parse_scontrol_job

__all__ = [
    "EXIT_FILE", "SCRIPT_NAME", "SLURM_STATES", "STDERR_FILE", "STDOUT_FILE", "BackendError", "KubernetesBackend",
    "Launch", "Launcher", "LocalBackend", "PollResult", "Runner", "SlurmBackend", "SlurmRecord", "_group_runs",
    "count_lines", "get_backend", "job_environment", "parse_sacct", "parse_scontrol_job", "python_command",
    "read_exit_code", "script_body", "secret_name", "summary_line", "tail",
]


def get_backend(name: str) -> Launcher:
    if name == "local":
        return LocalBackend()
    if name == "slurm":
        return SlurmBackend()
    if name == "kubernetes":
        return KubernetesBackend()
    raise BackendError(f"unknown backend {name!r}; expected local, slurm or kubernetes")
