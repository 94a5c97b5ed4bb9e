"""Where a job's commands run: a local subprocess, a Slurm batch job, or a Kubernetes Job.

One small interface (``submit``, ``poll``, ``cancel``, ``fetch``) over one artefact: a bash script in the
job's work folder that runs the commands, sends their stdout/stderr to ``stdout.log`` / ``stderr.log`` and
writes the exit status to ``exit_code`` last. The watcher reads progress files from the same folder, so
Slurm and Kubernetes assume the work root is a shared filesystem (NFS / a ReadWriteMany volume mounted at
the same path on the nodes).

What could be exercised here: ``LocalBackend`` runs for real in the tests (Celery worker → subprocess).
No Slurm controller or Kubernetes cluster exists on this machine, so ``SlurmBackend`` and
``KubernetesBackend`` are tested only against the sbatch script, manifest and command lines they produce
(their ``runner`` is replaced by a recorder in tests); their parsing of ``sacct``/``squeue``/``kubectl``
output follows those tools' documented formats and has not run against a real cluster.
"""
from __future__ import annotations

import json
import os
import shlex
import signal
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

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


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


def _default_runner(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=120, check=False)


def job_environment(extra: dict[str, str]) -> dict[str, str]:
    """Offline model loading everywhere; the repository on PYTHONPATH so ``python -m rewards.…`` resolves."""
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(settings.BASE_DIR)}
    env.update(extra)
    return env


def script_body(launch: Launch) -> str:
    """The shared part of every backend's script: run the commands, keep the logs, record the exit status."""
    exports = "\n".join(f"export {key}={shlex.quote(value)}" for key, value in sorted(job_environment(launch.env).items()))
    commands = " && \\\n  ".join(shlex.join(command) for command in launch.commands)
    work = shlex.quote(str(launch.work_dir))
    return (
        "set -uo pipefail\n"
        f"cd {shlex.quote(str(settings.BASE_DIR))}\n"
        f"{exports}\n"
        f"rm -f {work}/{EXIT_FILE}\n"
        "(\n"
        f"  {commands}\n"
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


def _finished(work_dir: Path) -> PollResult | None:
    code = read_exit_code(work_dir)
    if code is None:
        return None
    return PollResult("succeeded" if code == 0 else "failed", code)


class Backend(Protocol):
    name: str

    def submit(self, launch: Launch) -> str: ...

    def poll(self, launch: Launch, external_id: str) -> PollResult: ...

    def cancel(self, launch: Launch, external_id: str) -> None: ...

    def fetch(self, launch: Launch, external_id: str) -> Path: ...


def _group_runs(pgid: int, script: Path) -> bool:
    """Whether a live process of group ``pgid`` on this machine has ``script`` on its command line (Linux /proc)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return True  # no way to tell: trust the recorded pid
    wanted = os.fsencode(str(script))
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            group = int(stat.rsplit(")", 1)[1].split()[2])  # fields after "(comm)": state, ppid, pgrp
            if group == pgid and wanted in (entry / "cmdline").read_bytes().split(b"\0"):
                return True
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile, or not ours to read
    return False


class LocalBackend:
    """A subprocess on this machine (a worker of the ``gpu`` queue, or the CPU), in its own process group,
    led by ``rewards.jobs.tether`` so that the group stops when its watcher dies (a SIGKILLed pool process)."""

    name = "local"
    _children: dict[int, subprocess.Popen[bytes]] = {}

    def write_script(self, launch: Launch) -> Path:
        launch.work_dir.mkdir(parents=True, exist_ok=True)
        launch.script_path.write_text("#!/usr/bin/env bash\n" + script_body(launch), encoding="utf-8")
        return launch.script_path

    def submit(self, launch: Launch) -> str:
        script = self.write_script(launch)
        (launch.work_dir / EXIT_FILE).unlink(missing_ok=True)  # never read a previous attempt's status
        tether = [sys.executable, "-m", "rewards.jobs.tether", str(os.getpid())]
        process = subprocess.Popen([*tether, "bash", str(script)], cwd=settings.BASE_DIR, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self._children[process.pid] = process
        return str(process.pid)

    def _alive(self, pid: int) -> bool:
        child = self._children.get(pid)
        if child is not None:
            return child.poll() is None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def poll(self, launch: Launch, external_id: str) -> PollResult:
        done = _finished(launch.work_dir)
        if done is not None:
            self._children.pop(int(external_id), None)
            return done
        if self._alive(int(external_id)):
            return PollResult("running")
        done = _finished(launch.work_dir)  # it may have finished between the two checks
        if done is not None:
            return done
        return PollResult("lost", None, f"process {external_id} exited without writing an exit status")

    def cancel(self, launch: Launch, external_id: str) -> None:
        """SIGTERM to the whole process group (tether, bash and the trainer), SIGKILL if still there after 10 s.

        Only a group running this job's script is signalled: the reaper may run on another machine or container
        (where the pid is someone else's, and the tether has stopped the job by itself), or the pid may be reused.
        """
        pid = int(external_id)
        if not _group_runs(pid, launch.script_path):
            return
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        child = self._children.pop(pid, None)
        if child is not None:
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if child is not None:
            child.wait(timeout=10)

    def fetch(self, launch: Launch, external_id: str) -> Path:
        return launch.work_dir


# --- Slurm ------------------------------------------------------------------------------------------

SLURM_STATES = {
    "COMPLETED": "succeeded",
    "FAILED": "failed", "NODE_FAIL": "lost", "BOOT_FAIL": "lost", "OUT_OF_MEMORY": "failed", "TIMEOUT": "failed",
    "DEADLINE": "failed", "PREEMPTED": "lost", "CANCELLED": "cancelled",
    "PENDING": "running", "RUNNING": "running", "CONFIGURING": "running", "COMPLETING": "running",
    "REQUEUED": "running", "RESIZING": "running", "SUSPENDED": "running",
}


class SlurmBackend:
    """``sbatch`` a script, poll ``sacct`` (``squeue`` while accounting lags), ``scancel`` it.

    Not exercised against a real Slurm here (no controller on this machine): tests check the script and
    the command lines through a recording ``runner``.
    """

    name = "slurm"

    def __init__(self, runner: Runner | None = None) -> None:
        self.runner = runner or _default_runner
        self.options: dict[str, Any] = getattr(settings, "STEPLAB_SLURM", {})

    def script(self, launch: Launch) -> str:
        lines = ["#!/usr/bin/env bash", f"#SBATCH --job-name={launch.name}",
                 f"#SBATCH --output={launch.work_dir}/slurm-%j.out", f"#SBATCH --time={launch.time_limit_minutes}",
                 "#SBATCH --nodes=1", "#SBATCH --ntasks=1",
                 f"#SBATCH --cpus-per-task={int(self.options.get('cpus_per_task', 8))}"]
        if launch.gpus:
            lines.append(f"#SBATCH --gres=gpu:{launch.gpus}")
        for key in ("partition", "account", "qos", "mem"):
            if self.options.get(key):
                lines.append(f"#SBATCH --{key}={self.options[key]}")
        return "\n".join(lines) + "\n" + script_body(launch)

    def _run(self, argv: list[str]) -> str:
        result = self.runner(argv)
        if result.returncode != 0:
            raise BackendError(f"{shlex.join(argv)} failed (exit {result.returncode}): {result.stderr.strip()}")
        return result.stdout

    def submit(self, launch: Launch) -> str:
        launch.work_dir.mkdir(parents=True, exist_ok=True)
        launch.script_path.write_text(self.script(launch), encoding="utf-8")
        (launch.work_dir / EXIT_FILE).unlink(missing_ok=True)
        out = self._run(["sbatch", "--parsable", str(launch.script_path)]).strip()
        job_id = out.split(";", 1)[0]  # --parsable prints "id" or "id;cluster"
        if not job_id.isdigit():
            raise BackendError(f"sbatch printed no job id: {out!r}")
        return job_id

    def poll(self, launch: Launch, external_id: str) -> PollResult:
        out = self._run(["sacct", "-j", external_id, "-X", "--noheader", "--parsable2", "--format=State,ExitCode"])
        line = next((l for l in out.splitlines() if l.strip()), "")
        if not line:  # not in accounting yet: ask the queue
            queued = self._run(["squeue", "-h", "-j", external_id, "-o", "%T"]).strip()
            if queued:
                return PollResult("running")
            return _finished(launch.work_dir) or PollResult("lost", None, f"Slurm job {external_id} is unknown")
        state_word, _, exit_field = line.partition("|")
        state = SLURM_STATES.get(state_word.split()[0], "running") if state_word else "running"
        code = _finished(launch.work_dir)
        if state == "succeeded" or state == "failed":
            exit_code = code.exit_code if code else int(exit_field.split(":")[0] or 1)
            return PollResult("succeeded" if exit_code == 0 and state == "succeeded" else "failed", exit_code,
                              "" if state == "succeeded" else f"Slurm state {state_word}")
        if state in ("lost", "cancelled"):
            return PollResult(state, None, f"Slurm state {state_word}")
        return PollResult("running")

    def cancel(self, launch: Launch, external_id: str) -> None:
        self._run(["scancel", external_id])

    def fetch(self, launch: Launch, external_id: str) -> Path:
        return launch.work_dir


# --- Kubernetes -------------------------------------------------------------------------------------

class KubernetesBackend:
    """A ``batch/v1`` Job applied with ``kubectl``, watched with ``kubectl get job -o json``, deleted to cancel.

    Not exercised against a real cluster here: tests check the manifest and the kubectl command lines.
    The work root must be a shared volume (``STEPLAB_KUBERNETES['volume_claim']``) mounted at the same path.
    """

    name = "kubernetes"

    def __init__(self, runner: Runner | None = None) -> None:
        self.runner = runner or _default_runner
        self.options: dict[str, Any] = getattr(settings, "STEPLAB_KUBERNETES", {})

    @property
    def namespace(self) -> str:
        return str(self.options.get("namespace", "default"))

    def manifest(self, launch: Launch) -> dict[str, Any]:
        work_root = str(self.options.get("work_root", launch.work_dir.parent))
        resources: dict[str, Any] = {"requests": {"cpu": str(self.options.get("cpu", "4")),
                                                  "memory": str(self.options.get("memory", "32Gi"))}}
        if launch.gpus:
            resources["limits"] = {"nvidia.com/gpu": str(launch.gpus)}
        container = {
            "name": "steplab-job",
            "image": str(self.options.get("image", "steplab:latest")),
            "command": ["bash", str(launch.script_path)],
            "workingDir": str(settings.BASE_DIR),
            "resources": resources,
            "volumeMounts": [{"name": "steplab-work", "mountPath": work_root}],
        }
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": launch.name, "namespace": self.namespace,
                         "labels": {"app.kubernetes.io/part-of": "steplab", "steplab/job": launch.name}},
            "spec": {
                "backoffLimit": 0,
                "activeDeadlineSeconds": launch.time_limit_minutes * 60,
                "ttlSecondsAfterFinished": int(self.options.get("ttl_seconds", 7 * 24 * 3600)),
                "template": {
                    "metadata": {"labels": {"steplab/job": launch.name}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [container],
                        "volumes": [{"name": "steplab-work", "persistentVolumeClaim": {
                            "claimName": str(self.options.get("volume_claim", "steplab-work"))}}],
                    },
                },
            },
        }

    def _run(self, argv: list[str]) -> str:
        result = self.runner(argv)
        if result.returncode != 0:
            raise BackendError(f"{shlex.join(argv)} failed (exit {result.returncode}): {result.stderr.strip()}")
        return result.stdout

    def submit(self, launch: Launch) -> str:
        launch.work_dir.mkdir(parents=True, exist_ok=True)
        launch.script_path.write_text("#!/usr/bin/env bash\n" + script_body(launch), encoding="utf-8")
        manifest_path = launch.work_dir / "job.k8s.json"
        manifest_path.write_text(json.dumps(self.manifest(launch), indent=2) + "\n", encoding="utf-8")
        (launch.work_dir / EXIT_FILE).unlink(missing_ok=True)
        self._run(["kubectl", "apply", "-f", str(manifest_path)])
        return launch.name

    def poll(self, launch: Launch, external_id: str) -> PollResult:
        result = self.runner(["kubectl", "get", "job", external_id, "-n", self.namespace, "-o", "json"])
        if result.returncode != 0:
            return _finished(launch.work_dir) or PollResult("lost", None, f"Kubernetes Job {external_id}: "
                                                                         f"{result.stderr.strip()}")
        status = json.loads(result.stdout).get("status", {})
        if status.get("succeeded"):
            done = _finished(launch.work_dir)
            return done or PollResult("succeeded", 0)
        if status.get("failed"):
            reasons = [c.get("reason", "") for c in status.get("conditions", []) if c.get("type") == "Failed"]
            done = _finished(launch.work_dir)
            return PollResult("failed", done.exit_code if done else None,
                              f"Kubernetes Job failed: {', '.join(r for r in reasons if r) or 'pod failed'}")
        return PollResult("running")

    def cancel(self, launch: Launch, external_id: str) -> None:
        self._run(["kubectl", "delete", "job", external_id, "-n", self.namespace, "--wait=false",
                   "--cascade=foreground"])

    def fetch(self, launch: Launch, external_id: str) -> Path:
        return launch.work_dir


def get_backend(name: str) -> Backend:
    if name == "local":
        return LocalBackend()
    if name == "slurm":
        return SlurmBackend()
    if name == "kubernetes":
        return KubernetesBackend()
    raise BackendError(f"unknown backend {name!r}; expected local, slurm or kubernetes")


def python_command(*args: str) -> list[str]:
    """``python -m …`` with the interpreter of this install (the same venv on a worker node)."""
    return [str(getattr(settings, "STEPLAB_JOB_PYTHON", "") or sys.executable), "-m", *args]
