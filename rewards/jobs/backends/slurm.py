"""The Slurm backend: ``sbatch`` a script, read its state from the queue, ``scancel`` it."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from .common import (
    EXIT_FILE,
    BackendError,
    CommandLineBackend,
    Launch,
    PollResult,
    Runner,
    default_runner,
    result_from_exit_file,
    script_body,
)

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


class SlurmBackend(CommandLineBackend):
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
        self.runner = runner or default_runner
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
            return result_from_exit_file(launch.work_dir) or PollResult(
                "lost", None, f"Slurm job {external_id} is unknown to sacct, scontrol and the jobcomp log")
        state = SLURM_STATES.get(record.state, "running")
        if state == "running":
            return PollResult("running", None, record.describe())
        if state == "cancelled":
            return PollResult("cancelled", None, record.describe())
        done = result_from_exit_file(launch.work_dir)  # the script's own status, when it lived to write it
        if state == "succeeded":
            return done if done is not None else PollResult("succeeded", record.exit_code)
        # failed or lost: killed before writing its status (signal, time limit, node) → the queue says why
        return PollResult("failed" if state == "failed" else "lost", done.exit_code if done else None,
                          record.describe())

    def cancel(self, launch: Launch, external_id: str) -> None:
        self._run(["scancel", external_id])

