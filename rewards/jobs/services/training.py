"""Training jobs: validate a request into a trainer job file, queue it, watch it, register the model.

The job file is validated with ``rewards.training.parse_config`` (no torch import) before anything is
queued, so a misspelt hyper-parameter is refused in the form, not hours later on a GPU node.
"""
from __future__ import annotations

import contextlib
import json
import math
import shutil
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import transaction

from annotate.models import AutoTrain, Campaign
from annotate.permissions import SYSTEM, Actor, account_of, can_run_models, require
from annotate.scales import PM1, campaign_scale
from rewards.formats import registry as formats
from rewards.models import DatasetVersion
from rewards.services.datasets import local_file
from rewards.training.config import TrainingConfigError, parse_config
from steplab import jobs

from ..backends import Launch, python_command
from ..models import BackendKind, JobStatus, Kind, RewardModel, TrainingJob
from . import runner

#: keys a user may set; kind, dataset, base_model and output_dir come from the request itself
USER_KEYS = ("max_steps", "epochs", "learning_rate", "batch_size", "gradient_accumulation_steps", "max_length",
             "seed", "lora", "neutral", "bf16", "gradient_checkpointing", "eval_fraction", "score_aggregation",
             "limit", "max_eval_rows", "logging_steps", "method", "head_features", "head_model", "exclude_problems",
             "answers", "threshold_folds")
CURVE_POINTS = 2000
# What an empty export means, in the words a campaign admin can act on.
MODELS_ONLY = "only the campaign's admins and researchers (and staff) run reward-model work on it"
EMPTY_DATASET = {
    Kind.PRM: "the stepwise dataset of {version} has no rows: none of its solutions has finished step labels",
    Kind.ORM: "the outcome dataset of {version} has no rows: none of its solutions has a graded final answer",
}


class JobInputError(ValueError):
    """A bad job request; ``field`` names the input at fault."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


def jobs_root() -> Path:
    return Path(settings.STEPLAB_JOBS_ROOT)


@contextlib.contextmanager
def new_work_dir(prefix: str) -> Iterator[Path]:
    """A fresh folder for a job's files under the jobs root, removed again when the job is not created."""
    work = jobs_root() / f"{prefix}-{uuid.uuid4().hex[:12]}"
    work.mkdir(parents=True)
    try:
        yield work
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def chosen_settings(config: Mapping[str, Any] | None, allowed: Sequence[str], what: str) -> dict[str, Any]:
    """The settings a user gave a job, refused (naming the key) when it is not an object or holds another key."""
    if config is not None and not isinstance(config, Mapping):
        raise JobInputError("config", f"must be an object, got {type(config).__name__}")
    keys = dict(config or {})
    for key in keys:
        if key not in allowed:
            raise JobInputError(key, f"is not a {what} setting you can choose (allowed: {', '.join(allowed)})")
    return keys


def backbones() -> dict[str, str]:
    """Backbones users can choose: ``default`` (the CPU MiniLM) plus ``STEPLAB_BACKBONES`` (name → folder)."""
    return {"default": "default", **settings.STEPLAB_BACKBONES}


def training_files(kind: str) -> tuple[str, ...]:
    """The version files a PRM or an ORM trains on, in order of preference: those of the formats that declare
    they train it (``rewards.formats``)."""
    return tuple(file.key for fmt in formats.formats() if fmt.trains == kind for file in fmt.files)


def dataset_file(version: DatasetVersion, kind: str) -> Path:
    """The version's file a PRM (TRL stepwise) or ORM (outcome) trains on, as a local path (a storage without
    paths, S3, is downloaded once into the jobs folder, which job nodes share)."""
    if version.status != DatasetVersion.Status.READY:
        raise JobInputError("dataset_version", f"{version} is {version.status}, not ready")
    for fmt in training_files(kind):
        if fmt in version.files:
            if version.files[fmt].get("rows") == 0:
                raise JobInputError("dataset_version", EMPTY_DATASET[Kind(kind)].format(version=version))
            return local_file(version, fmt, jobs_root() / "datasets")
    raise JobInputError("dataset_version", f"{version} has no {' or '.join(training_files(kind))} file "
                                           f"(has: {', '.join(sorted(version.files)) or 'none'})")


@dataclass(frozen=True)
class TrainingRequest:
    kind: str
    dataset_version: DatasetVersion | None = None
    dataset_path: Path | None = None
    base_model: str = "default"
    hyper: dict[str, Any] | None = None
    backend: str = BackendKind.LOCAL
    gpus: int = 0


def _validate(request: TrainingRequest) -> tuple[Path, dict[str, Any]]:
    if request.kind not in Kind.values:
        raise JobInputError("kind", f"must be one of {', '.join(Kind.values)}, got {request.kind!r}")
    if request.backend not in BackendKind.values:
        raise JobInputError("backend", f"must be one of {', '.join(BackendKind.values)}, got {request.backend!r}")
    if (request.dataset_version is None) == (request.dataset_path is None):
        raise JobInputError("dataset_version", "give exactly one of a dataset version or a dataset file")
    if request.base_model not in backbones():
        raise JobInputError("base_model", f"must be one of {', '.join(backbones())}, got {request.base_model!r}")
    hyper = dict(request.hyper or {})
    for key in hyper:
        if key not in USER_KEYS:
            raise JobInputError(key, f"is not a setting you can choose (allowed: {', '.join(USER_KEYS)})")
    path = (dataset_file(request.dataset_version, request.kind) if request.dataset_version is not None
            else Path(request.dataset_path).resolve())  # type: ignore[arg-type]
    config = {"kind": request.kind, "dataset": str(path), "base_model": backbones()[request.base_model],
              "output_dir": "output", **{k: v for k, v in hyper.items() if v is not None}}
    scale = campaign_scale(request.dataset_version.campaign) if request.dataset_version is not None else PM1
    if not scale.is_pm1:  # the node reads the campaign's scale as plain data (JSON keys are strings)
        config["label_map"] = {str(value): positive for value, positive in scale.training_map().items()}
    try:
        parse_config(config, base_dir=jobs_root())
    except TrainingConfigError as exc:
        raise JobInputError(exc.key or "config", str(exc)) from None
    return path, config


def start_training_job(request: TrainingRequest, *, user: Actor, auto: bool = False,
                       because: str = "") -> TrainingJob:
    """Validate, record and queue a job (the Celery task is sent after commit); ``because`` says why an
    automatic one started; ``NotAllowed`` unless ``user`` may run reward-model work on the version's campaign (a
    dataset given by path: staff)."""
    version = request.dataset_version
    require(can_run_models, user, version.campaign if version else None, MODELS_ONLY)
    path, config = _validate(request)
    job = TrainingJob.objects.create(
        kind=request.kind, dataset_version=version, campaign=version.campaign if version else None,
        dataset_path=str(path), config=config, backend=request.backend, started_by=account_of(user), auto_started=auto,
        started_because=because, total_steps=config.get("max_steps"))
    work_dir = jobs_root() / f"train-{job.pk}-{uuid.uuid4().hex[:8]}"
    config["output_dir"] = str(work_dir / "output")
    job.work_dir, job.output_dir, job.config = str(work_dir), config["output_dir"], config
    job.save(update_fields=["work_dir", "output_dir", "config"])
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / "job.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    jobs.dispatch_on_commit(job)
    return job


def training_launch(job: TrainingJob) -> Launch:
    work_dir = Path(job.work_dir)
    gpus = 1 if job.backend != BackendKind.LOCAL else 0
    return Launch(name=f"steplab-train-{job.pk}", work_dir=work_dir, gpus=gpus,
                  commands=[python_command("rewards.training", "train", "--config", str(work_dir / "job.json"))])


def read_events(path: Path) -> list[dict[str, Any]]:
    """The trainer's events.jsonl; a half-written last line (the trainer is still writing) is skipped."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    events = []
    for line in lines:
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events


def progress_from_events(job: TrainingJob, events: list[dict[str, Any]]) -> dict[str, Any]:
    """step, total_steps, progress and the loss curve, from ``data`` and ``log`` events."""
    total = job.config.get("max_steps")
    curve = [{"step": e["step"], "loss": e.get("loss"), "learning_rate": e.get("learning_rate"),
              "examples_per_s": e.get("examples_per_s")} for e in events if e.get("event") == "log"]
    if total is None:
        data = next((e for e in events if e.get("event") == "data"), None)
        if data is not None:
            rows = data["train"].get("rows_used", 0)
            batch = job.config.get("batch_size", 8) * job.config.get("gradient_accumulation_steps", 1)
            total = max(1, math.ceil(rows / batch) * math.ceil(float(job.config.get("epochs", 1.0))))
    step = curve[-1]["step"] if curve else 0
    updates: dict[str, Any] = {"step": step, "curve": curve[-CURVE_POINTS:]}
    if total:
        updates["total_steps"] = total
        updates["progress"] = min(step / total, 0.99)
    return updates


def register_model(job: TrainingJob) -> RewardModel:
    """Called once the trainer exited 0: read its metrics and record the model."""
    output = Path(job.output_dir)
    metrics = json.loads((output / "metrics.json").read_text(encoding="utf-8"))
    if not (output / "steplab_reward_model.json").is_file():
        raise FileNotFoundError(f"{output} has no steplab_reward_model.json: not a trained model folder")
    # The last "log" event is the last logged step (step 20 of 24 when every tenth is logged); the trainer's
    # metrics hold the step it ended on, which the finished job shows.
    steps = int(metrics.get("train", {}).get("steps", job.step))
    TrainingJob.objects.filter(pk=job.pk).update(metrics=metrics, step=steps)
    job.metrics, job.step = metrics, steps
    version = job.dataset_version
    source = str(version) if version else Path(job.dataset_path).name
    trained_on = int(metrics.get("data", {}).get("train", {}).get("rows_used", 0))
    return RewardModel.objects.create(
        job=job, kind=job.kind, campaign=job.campaign, dataset_version=version, location=str(output),
        name=f"{job.kind.upper()} #{job.pk} on {source}" + (f" (first {job.config['limit']})"
                                                            if job.config.get("limit") else ""),
        base_model=str(job.config.get("base_model")), metrics=metrics, trained_on=trained_on)


def training_hooks(job: TrainingJob) -> runner.JobHooks:
    events_path = Path(job.output_dir) / "events.jsonl"
    return runner.JobHooks(launch=training_launch(job),
                           progress=lambda: progress_from_events(job, read_events(events_path)),
                           on_success=lambda: register_model(job))


def run_training_job(job_id: int) -> str | None:
    """The Celery task's body: claim the job and watch it to the end; None when there was nothing to run."""
    job = runner.claim(TrainingJob, job_id)
    if job is None:
        return None
    return runner.watch(job, training_hooks(job))


def request_cancel(job: Any) -> str:
    """A queued job is cancelled at once; a running one is flagged and its watcher stops the process
    (if it was claimed meanwhile, the watcher finds it no longer running and stops the process too)."""
    if job.status == JobStatus.QUEUED and runner.finish(job, JobStatus.CANCELLED, error="cancelled before it started"):
        return job.status
    type(job).objects.filter(pk=job.pk, status=JobStatus.RUNNING).update(cancel_requested=True)
    job.refresh_from_db()
    return job.status


# --- new data → automatic PRM + ORM jobs -----------------------------------------------------------

def labeled_solutions(version: DatasetVersion) -> int:
    """Labeled solutions in a version: the rows of its TRL stepwise file (one per labeled solution)."""
    for fmt in training_files(Kind.PRM):
        info = version.files.get(fmt)
        if info and isinstance(info.get("rows"), int):
            return int(info["rows"])
    try:
        with default_storage.open(version.file_name(training_files(Kind.PRM)[0]), "rb") as handle:  # S3 has no path()
            return sum(1 for line in handle if line.strip())
    except (KeyError, FileNotFoundError):
        return 0


def auto_train(min_new: int | None = None, *, base_model: str = "default") -> list[TrainingJob]:
    """For each campaign with automatic training on whose newest ready version has ≥ ``min_new`` more labeled
    solutions than the last auto-trained one, start a PRM and an ORM job on it (once per version), each held to
    the campaign's budget of optimizer steps and saying why it started."""
    threshold = settings.STEPLAB_AUTO_TRAIN_MIN_NEW_SOLUTIONS if min_new is None else min_new
    started: list[TrainingJob] = []
    ready = Campaign.objects.filter(is_active=True, auto_train=AutoTrain.ON,
                                    dataset_versions__status=DatasetVersion.Status.READY)
    for campaign in ready.distinct():
        newest = campaign.dataset_versions.filter(status=DatasetVersion.Status.READY).order_by("-number").first()
        if newest is None or TrainingJob.objects.filter(dataset_version=newest, auto_started=True).exists():
            continue
        last_job = (TrainingJob.objects.filter(campaign=campaign, auto_started=True, dataset_version__isnull=False)
                    .select_related("dataset_version").order_by("-dataset_version__number").first())
        last = last_job.dataset_version if last_job else None
        new = labeled_solutions(newest) - (labeled_solutions(last) if last else 0)
        if new < threshold:
            continue
        hyper = {**settings.STEPLAB_AUTO_TRAIN_HYPER, "max_steps": campaign.auto_train_max_steps}
        because = f"{new} new labeled solutions " + (f"since v{last.number}" if last else f"in v{newest.number}")
        with transaction.atomic():
            for kind in (Kind.PRM, Kind.ORM):
                try:
                    started.append(start_training_job(TrainingRequest(kind=kind, dataset_version=newest,
                                                                      base_model=base_model, hyper=hyper),
                                                      user=SYSTEM, auto=True, because=because))
                except JobInputError:
                    continue  # e.g. no outcome file in this version: the other kind still starts
    return started
