"""What every backend shares: the launch, the poll result, the one script and its exit-status protocol.

Every backend runs one artefact: a bash script in the job's work folder that runs the commands, sends their
stdout/stderr to ``stdout.log`` / ``stderr.log`` and writes the exit status to ``exit_code`` last. The watcher
reads progress files from the same folder, so Slurm and Kubernetes assume the work root is a shared filesystem
(NFS / a ReadWriteMany volume mounted at the same path on the nodes).
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings

SCRIPT_NAME = "run.sh"
EXIT_FILE = "exit_code"
STDOUT_FILE = "stdout.log"
STDERR_FILE = "stderr.log"

#: runs a command line: argv, and where a launch has secrets, ``env`` (added to this process's) or ``input``
Runner = Callable[..., "subprocess.CompletedProcess[str]"]


class BackendError(RuntimeError):
    """The backend refused or failed an operation (the message says which command and why)."""


@dataclass(frozen=True)
class Launch:
    """What to run: ``commands`` (argv lists, run in order, stopping at the first failure) in ``work_dir``."""

    name: str
    work_dir: Path
    commands: list[list[str]]
    gpus: int = 0
    env: dict[str, str] = field(default_factory=dict)
    time_limit_minutes: int = 24 * 60
    #: variables no file may hold (a served endpoint's API key): never in the script or a manifest; a local job
    #: and sbatch start with them in their environment, a Kubernetes Job reads them from a Secret it names
    secrets: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def script_path(self) -> Path:
        return self.work_dir / SCRIPT_NAME


@dataclass(frozen=True)
class PollResult:
    """``state``: running | succeeded | failed | cancelled | lost (the process vanished without an exit code)."""

    state: str
    exit_code: int | None = None
    reason: str = ""

    @property
    def finished(self) -> bool:
        return self.state != "running"


def default_runner(argv: Sequence[str], *, env: dict[str, str] | None = None,
                    input: str | None = None) -> subprocess.CompletedProcess[str]:  # noqa: A002 - subprocess's name
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=120, check=False, input=input,
                          env=None if env is None else {**os.environ, **env})


def job_environment(extra: dict[str, str]) -> dict[str, str]:
    """Offline model loading everywhere; the repository on PYTHONPATH so ``python -m rewards.…`` resolves."""
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(settings.BASE_DIR)}
    env.update(extra)
    return env


def script_body(launch: Launch, *, setup: str = "") -> str:
    """The shared part of every backend's script: run the commands, keep the logs, record the exit status.

    ``setup``: shell lines run first, inside the logged part (``module load …``, activating an environment):
    if they fail, the commands do not run and the reason is in ``stderr.log``."""
    exports = "\n".join(f"export {key}={shlex.quote(value)}"
                        for key, value in sorted(job_environment(launch.env).items()))
    commands = " && \\\n  ".join(shlex.join(command) for command in launch.commands)
    work = shlex.quote(str(launch.work_dir))
    return (
        "set -uo pipefail\n"
        f"cd {shlex.quote(str(settings.BASE_DIR))}\n"
        f"{exports}\n"
        f"rm -f {work}/{EXIT_FILE}\n"
        "(\n"
        + (f"  set -e\n  {setup.strip()}\n" if setup.strip() else "")
        + f"  {commands}\n"
        f") >>{work}/{STDOUT_FILE} 2>>{work}/{STDERR_FILE}\n"
        "status=$?\n"
        f"echo $status > {work}/{EXIT_FILE}.partial && mv {work}/{EXIT_FILE}.partial {work}/{EXIT_FILE}\n"
        "exit $status\n"
    )


def read_exit_code(work_dir: Path) -> int | None:
    try:
        return int((work_dir / EXIT_FILE).read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def summary_line(work_dir: Path) -> dict[str, Any]:
    """The last JSON object a node program printed on stdout: its summary (counts, tokens, timings); {} when none."""
    path = work_dir / STDOUT_FILE
    lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines() if path.is_file() else []
    for line in reversed(lines):
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return {}


def count_lines(path: Path) -> int:
    """Lines a job has written so far to one of its files (0 while the file does not exist)."""
    try:
        with path.open("rb") as handle:
            return sum(1 for _ in handle)
    except FileNotFoundError:
        return 0


def tail(path: Path, max_bytes: int = 8000) -> str:
    """The last ``max_bytes`` of a log file (from a line start), '' when it does not exist."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            data = handle.read()
    except FileNotFoundError:
        return ""
    text = data.decode("utf-8", errors="replace")
    if size > max_bytes and "\n" in text:
        text = text.split("\n", 1)[1]
    return text


def result_from_exit_file(work_dir: Path) -> PollResult | None:
    """How the script ended by its own ``exit_code`` file; None while it has not written one."""
    code = read_exit_code(work_dir)
    if code is None:
        return None
    return PollResult("succeeded" if code == 0 else "failed", code)


class Launcher(Protocol):
    """Where a job of one ``BackendKind`` runs: the watcher submits its script, polls it, cancels it."""

    name: str
    outlives_watcher: bool  # the job goes on (and its end stays known) after its watcher dies: a scheduler's

    def submit(self, launch: Launch) -> str: ...

    def poll(self, launch: Launch, external_id: str) -> PollResult: ...

    def cancel(self, launch: Launch, external_id: str) -> None: ...



class CommandLineBackend:
    """A cluster driven through its command-line tools: a failed command is a BackendError with its stderr."""

    runner: Runner

    def _run(self, argv: list[str], **secret: Any) -> str:
        """``secret``: the runner's ``env`` or ``input``, given only when a launch has secrets."""
        result = self.runner(argv, **secret) if secret else self.runner(argv)
        if result.returncode != 0:
            raise BackendError(f"{shlex.join(argv)} failed (exit {result.returncode}): {result.stderr.strip()}")
        return result.stdout



def python_command(*args: str) -> list[str]:
    """``python -m …`` with the interpreter of this install (the same venv on a worker node)."""
    return [settings.STEPLAB_JOB_PYTHON or sys.executable, "-m", *args]
