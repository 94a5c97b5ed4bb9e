"""Where a job's commands run: a local subprocess, a Slurm batch job, or a Kubernetes Job.

One small interface (``submit``, ``poll``, ``cancel``) over one artefact: a bash script in the
job's work folder that runs the commands, sends their stdout/stderr to ``stdout.log`` / ``stderr.log`` and
writes the exit status to ``exit_code`` last. The watcher reads progress files from the same folder, so
Slurm and Kubernetes assume the work root is a shared filesystem (NFS / a ReadWriteMany volume mounted at
the same path on the nodes).

What runs for real in the tests: ``LocalBackend`` (Celery worker → subprocess) and ``SlurmBackend`` (a
single-node Slurm started by ``scripts/slurm-local``). No Kubernetes API server can run here, so
``KubernetesBackend`` is tested on its manifest (validated against the Kubernetes JSON schema) and its
kubectl command lines (its ``runner`` is replaced by a recorder in tests).

Why one module of ~570 lines: the three backends share the script, its exit-status protocol and the process-group
handling line for line; a module per backend would scatter that protocol across three files.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
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


def _default_runner(argv: Sequence[str], *, env: dict[str, str] | None = None,
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


def _finished(work_dir: Path) -> PollResult | None:
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
    outlives_watcher = False  # the tether stops the job with its watcher
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
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                   env={**os.environ, **launch.secrets} if launch.secrets else None)
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
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        if child is not None:
            child.wait(timeout=10)


# --- Slurm ------------------------------------------------------------------------------------------

# Slurm's job states (``scontrol``/``sacct``/job-completion log spell them alike) → the backend's states.
# PENDING is "running" for Steplab: the watcher holds the job; the queue only has not started it yet.
SLURM_STATES = {
    "COMPLETED": "succeeded",
    "FAILED": "failed", "OUT_OF_MEMORY": "failed", "TIMEOUT": "failed", "DEADLINE": "failed",
    "NODE_FAIL": "lost", "BOOT_FAIL": "lost", "PREEMPTED": "lost",
    "CANCELLED": "cancelled",
    "PENDING": "running", "RUNNING": "running", "CONFIGURING": "running", "COMPLETING": "running",
    "REQUEUED": "running", "REQUEUE_HOLD": "running", "REQUEUE_FED": "running", "RESIZING": "running",
    "SUSPENDED": "running", "STOPPED": "running", "SIGNALING": "running", "STAGE_OUT": "running",
}
_NO_ACCOUNTING = "accounting storage is disabled"
_UNKNOWN_JOB = "invalid job id"


@dataclass(frozen=True)
class SlurmRecord:
    """One job as the queue describes it, from whichever source answered (``source``)."""

    job_id: str
    state: str
    exit_code: int = 0
    signal: int = 0
    reason: str = ""
    nodes: str = ""
    source: str = ""

    def describe(self) -> str:
        """E.g. ``Slurm job 12 FAILED (NonZeroExitCode; exit code 0, signal 9) on node vm [scontrol]``."""
        details = [self.reason] if self.reason and self.reason != "None" else []
        if self.exit_code or self.signal:
            details.append(f"exit code {self.exit_code}" + (f", signal {self.signal}" if self.signal else ""))
        text = f"Slurm job {self.job_id} {self.state}" + (f" ({'; '.join(details)})" if details else "")
        if self.nodes and self.nodes not in ("None", "(null)", "None assigned"):
            text += f" on node {self.nodes}"
        return f"{text} [{self.source}]"


def _key_values(line: str) -> dict[str, str]:
    """``Key=value`` pairs of one ``scontrol show job -o`` / job-completion line (values without spaces only;
    the ones read here never have any)."""
    return dict(re.findall(r"(?:^|\s)([A-Za-z][\w/:]*)=(\S*)", line))


def _exit_pair(text: str) -> tuple[int, int]:
    """Slurm's ``exit:signal`` pair ("0:9"), (0, 0) when missing."""
    code, _, sig = (text or "0:0").partition(":")
    try:
        return int(code or 0), int(sig or 0)
    except ValueError:
        return 0, 0


def parse_scontrol_job(output: str, job_id: str, source: str = "scontrol") -> SlurmRecord | None:
    """The last record of ``job_id`` in ``scontrol show job -o`` output or a jobcomp/filetxt log."""
    found = None
    for line in output.splitlines():
        fields = _key_values(line)
        if fields.get("JobId") == job_id and fields.get("JobState"):
            found = fields
    if found is None:
        return None
    code, sig = _exit_pair(found.get("ExitCode", ""))
    return SlurmRecord(job_id, found["JobState"], code, sig, found.get("Reason", ""), found.get("NodeList", ""),
                       source)


def parse_sacct(output: str, job_id: str) -> SlurmRecord | None:
    """``sacct -X --parsable2 --noheader --format=JobIDRaw,State,ExitCode,Reason,NodeList``; "CANCELLED by 0"
    keeps its first word. sacct's Reason is the last reason the job *waited* (a job that later failed still
    says "ReqNodeNotAvail"), so it is kept only while the job is pending. None while accounting has no row yet."""
    for line in output.splitlines():
        parts = line.split("|")
        if len(parts) >= 5 and parts[0] == job_id and parts[1].strip():
            state = parts[1].split()[0]
            code, sig = _exit_pair(parts[2])
            return SlurmRecord(job_id, state, code, sig, parts[3] if state == "PENDING" else "", parts[4], "sacct")
    return None


class _CommandLineBackend:
    """A cluster driven through its command-line tools: a failed command is a BackendError with its stderr."""

    runner: Runner

    def _run(self, argv: list[str], **secret: Any) -> str:
        """``secret``: the runner's ``env`` or ``input``, given only when a launch has secrets."""
        result = self.runner(argv, **secret) if secret else self.runner(argv)
        if result.returncode != 0:
            raise BackendError(f"{shlex.join(argv)} failed (exit {result.returncode}): {result.stderr.strip()}")
        return result.stdout


class SlurmBackend(_CommandLineBackend):
    """``sbatch`` a script; read its state from the queue; ``scancel`` it.

    Clusters differ in what they keep, so ``poll`` asks, in order: ``sacct`` (accounting through slurmdbd,
    the full history), ``scontrol show job`` (the controller's memory: running jobs and, for ``MinJobAge``
    seconds, finished ones) and the job-completion log (``JobCompType=jobcomp/filetxt``). ``sacct`` is
    skipped once it says accounting is disabled (or always, with ``states_from="scontrol"``). The tests run
    all of it against a real single-node Slurm (``scripts/slurm-local``).
    """

    name = "slurm"
    outlives_watcher = True
    _accounting: dict[str, bool] = {}  # per SLURM_CONF: whether sacct answers; asked once per process

    def __init__(self, runner: Runner | None = None, options: dict[str, Any] | None = None) -> None:
        self.runner = runner or _default_runner
        self.options: dict[str, Any] = settings.STEPLAB_SLURM if options is None else options

    def gpus(self, launch: Launch) -> int:
        """GPUs to request: ``gpus_per_job`` when set (0 on a CPU-only partition), else what the job asks."""
        configured = self.options.get("gpus_per_job")
        return launch.gpus if configured in (None, "") else int(configured)

    def script(self, launch: Launch) -> str:
        time_limit = str(self.options.get("time_limit") or launch.time_limit_minutes)
        lines = ["#!/usr/bin/env bash", f"#SBATCH --job-name={launch.name}",
                 f"#SBATCH --output={launch.work_dir}/slurm-%j.out", f"#SBATCH --time={time_limit}",
                 "#SBATCH --nodes=1", "#SBATCH --ntasks=1",
                 f"#SBATCH --cpus-per-task={int(self.options.get('cpus_per_task') or 8)}"]
        if gpus := self.gpus(launch):
            gpu_type = str(self.options.get("gpu_type") or "")
            lines.append(f"#SBATCH --gres=gpu:{gpu_type + ':' if gpu_type else ''}{gpus}")
        for key in ("partition", "account", "qos", "mem"):
            if self.options.get(key):
                lines.append(f"#SBATCH --{key}={self.options[key]}")
        lines += [f"#SBATCH {option}" for option in self.options.get("sbatch_options") or ()]
        return "\n".join(lines) + "\n" + script_body(launch, setup=str(self.options.get("setup") or ""))

    def submit(self, launch: Launch) -> str:
        launch.work_dir.mkdir(parents=True, exist_ok=True)
        launch.script_path.write_text(self.script(launch), encoding="utf-8")
        (launch.work_dir / EXIT_FILE).unlink(missing_ok=True)
        # sbatch hands its environment to the job (--export=ALL, Slurm's default): the secrets travel there
        out = self._run(["sbatch", "--parsable", str(launch.script_path)],
                        **({"env": launch.secrets} if launch.secrets else {})).strip()
        job_id = out.split(";", 1)[0]  # --parsable prints "id" or "id;cluster"
        if not job_id.isdigit():
            raise BackendError(f"sbatch printed no job id: {out!r}")
        return job_id

    # -- reading the queue ------------------------------------------------------------------------

    def _sacct(self, job_id: str) -> SlurmRecord | None:
        states_from = str(self.options.get("states_from") or "auto")
        key = os.environ.get("SLURM_CONF", "")
        if states_from == "scontrol" or (states_from == "auto" and self._accounting.get(key) is False):
            return None
        result = self.runner(["sacct", "-j", job_id, "-X", "--noheader", "--parsable2",
                              "--format=JobIDRaw,State,ExitCode,Reason,NodeList"])
        if result.returncode != 0:
            if states_from == "auto" and _NO_ACCOUNTING in (result.stderr + result.stdout).lower():
                self._accounting[key] = False
                return None
            raise BackendError(f"sacct -j {job_id} failed (exit {result.returncode}): {result.stderr.strip()}")
        self._accounting[key] = True
        return parse_sacct(result.stdout, job_id)

    def _scontrol(self, job_id: str) -> SlurmRecord | None:
        result = self.runner(["scontrol", "show", "job", "-o", job_id])
        if result.returncode != 0:
            if _UNKNOWN_JOB in result.stderr.lower():
                return None  # purged from the controller's memory (MinJobAge)
            raise BackendError(f"scontrol show job {job_id} failed (exit {result.returncode}): "
                               f"{result.stderr.strip()}")
        return parse_scontrol_job(result.stdout, job_id)

    def jobcomp_log(self) -> Path | None:
        """The job-completion log: ``jobcomp_log`` when set, else the controller's ``JobCompLoc`` for
        ``jobcomp/filetxt``; None where the cluster keeps no such file."""
        if self.options.get("jobcomp_log"):
            return Path(str(self.options["jobcomp_log"]))
        result = self.runner(["scontrol", "show", "config"])
        config = (dict(re.findall(r"^(\w+)\s+=\s+(.*?)\s*$", result.stdout, re.MULTILINE))
                  if result.returncode == 0 else {})
        if config.get("JobCompType") == "jobcomp/filetxt" and config.get("JobCompLoc", "").startswith("/"):
            return Path(config["JobCompLoc"])
        return None

    def _jobcomp(self, job_id: str) -> SlurmRecord | None:
        path = self.jobcomp_log()
        if path is None:
            return None
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        return parse_scontrol_job(text, job_id, source="jobcomp")

    def record(self, job_id: str) -> SlurmRecord | None:
        """The queue's word on a job: sacct, else scontrol, else the job-completion log; None if none knows it."""
        return self._sacct(job_id) or self._scontrol(job_id) or self._jobcomp(job_id)

    def poll(self, launch: Launch, external_id: str) -> PollResult:
        record = self.record(external_id)
        if record is None:
            return _finished(launch.work_dir) or PollResult("lost", None, f"Slurm job {external_id} is unknown "
                                                                         "to sacct, scontrol and the jobcomp log")
        state = SLURM_STATES.get(record.state, "running")
        if state == "running":
            return PollResult("running", None, record.describe())
        if state == "cancelled":
            return PollResult("cancelled", None, record.describe())
        done = _finished(launch.work_dir)  # the script's own status, when it lived to write it
        if state == "succeeded":
            return done if done is not None else PollResult("succeeded", record.exit_code)
        # failed or lost: killed before writing its status (signal, time limit, node) → the queue says why
        return PollResult("failed" if state == "failed" else "lost", done.exit_code if done else None,
                          record.describe())

    def cancel(self, launch: Launch, external_id: str) -> None:
        self._run(["scancel", external_id])


# --- Kubernetes -------------------------------------------------------------------------------------

class KubernetesBackend(_CommandLineBackend):
    """A ``batch/v1`` Job applied with ``kubectl``, watched with ``kubectl get job -o json``, deleted to cancel.

    Not exercised against a real cluster here: tests check the manifest and the kubectl command lines.
    The work root must be a shared volume (``STEPLAB_KUBERNETES['volume_claim']``) mounted at the same path.
    """

    name = "kubernetes"
    outlives_watcher = True

    def __init__(self, runner: Runner | None = None) -> None:
        self.runner = runner or _default_runner
        self.options: dict[str, Any] = settings.STEPLAB_KUBERNETES

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
        if launch.secrets:
            container["envFrom"] = [{"secretRef": {"name": secret_name(launch)}}]
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

    def submit(self, launch: Launch) -> str:
        launch.work_dir.mkdir(parents=True, exist_ok=True)
        launch.script_path.write_text("#!/usr/bin/env bash\n" + script_body(launch), encoding="utf-8")
        manifest_path = launch.work_dir / "job.k8s.json"
        manifest_path.write_text(json.dumps(self.manifest(launch), indent=2) + "\n", encoding="utf-8")
        (launch.work_dir / EXIT_FILE).unlink(missing_ok=True)
        if launch.secrets:  # on kubectl's stdin, never in a file
            secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "stringData": launch.secrets,
                      "metadata": {"name": secret_name(launch), "namespace": self.namespace,
                                   "labels": {"app.kubernetes.io/part-of": "steplab", "steplab/job": launch.name}}}
            self._run(["kubectl", "apply", "-f", "-"], input=json.dumps(secret))
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
        if launch.secrets:
            self._run(["kubectl", "delete", "secret", secret_name(launch), "-n", self.namespace, "--ignore-not-found"])


def secret_name(launch: Launch) -> str:
    """The Kubernetes Secret that holds a launch's secrets."""
    return f"{launch.name}-secrets"


def get_backend(name: str) -> Launcher:
    if name == "local":
        return LocalBackend()
    if name == "slurm":
        return SlurmBackend()
    if name == "kubernetes":
        return KubernetesBackend()
    raise BackendError(f"unknown backend {name!r}; expected local, slurm or kubernetes")


def python_command(*args: str) -> list[str]:
    """``python -m …`` with the interpreter of this install (the same venv on a worker node)."""
    return [settings.STEPLAB_JOB_PYTHON or sys.executable, "-m", *args]
