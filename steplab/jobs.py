"""The job layer every kind of background work shares: imports, training, scoring, sampling and comparisons.

A job row is the record of work a Celery task does elsewhere; the task only carries its id. Its life:

* **queued** — recorded; ``dispatch`` sends its task after commit and stamps ``dispatched_at`` and
  ``celery_task_id``. Null ``dispatched_at`` means "its task never reached the broker" (it was down):
  ``undispatched`` finds such jobs for the periodic dispatchers, which send them again.
* **running** — ``claim`` moves it there for exactly one caller (a conditional UPDATE), so a redelivered or
  duplicated task does nothing.
* **succeeded / failed / cancelled** — ``finish`` ends it once: whoever moves it out of queued/running first
  wins (a watcher, the reaper, a cancel).

Progress of a job whose work runs inside one long transaction (an import) is written through the declared
``PROGRESS_DATABASE`` connection, so pollers see it before that transaction commits.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from importlib import import_module
from typing import Any, ClassVar, TypeVar

from django.apps import apps
from django.conf import settings
from django.db import connections, models, transaction
from django.db.models import QuerySet
from django.utils import timezone

from steplab import events
from steplab.celery import app as celery_app
from steplab.celery import send_task

#: the settings' DATABASES alias of the second connection (same database as "default")
PROGRESS_DATABASE = "job_progress"
ERROR_TAIL_CHARS = 6000
#: how long a queued job with nothing ahead of it reads "starting" before the page asks whether a worker serves
#: its queue (the periodic dispatcher re-sends an unsent task after 30 s, too)
STARTING_GRACE_S = 30.0

J = TypeVar("J", bound="Job")


class JobStatus(models.TextChoices):  # labels: Django's, from the names ("Queued", …)
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


ACTIVE_STATUSES = (JobStatus.QUEUED, JobStatus.RUNNING)
FINAL_STATUSES = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)


class Job(models.Model):
    """What every job records: where it stands, whether its task was sent, how and when it ended."""

    #: the Celery task (by name) that runs a job of this kind with the job's id
    task_name: ClassVar[str]
    #: whether a running job of this kind holds a worker slot until it ends (its task does the work or watches
    #: it); a kind whose task only moves a chain on and returns says False
    holds_worker: ClassVar[bool] = True

    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED)
    error = models.TextField(blank=True, help_text="Why it failed.")
    dispatched_at = models.DateTimeField(null=True, blank=True,
                                         help_text="When its task reached the broker; null: to be sent again.")
    celery_task_id = models.CharField(max_length=100, blank=True, help_text="Id of the task last sent.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]  # every list of jobs shows the newest first

    def task_queue(self) -> str | None:
        """The Celery queue its task goes to; None: the task's own routing."""
        return None

    def queue_name(self) -> str:
        """The queue its task is served from: its own choice, else the task routes, else the default queue."""
        route = settings.CELERY_TASK_ROUTES.get(self.task_name, {})
        return self.task_queue() or route.get("queue") or settings.CELERY_TASK_DEFAULT_QUEUE

    def progress_words(self) -> str:
        """How far it got, in words ("40 % done"); kinds that count steps say so."""
        return f"{round(float(getattr(self, 'progress', 0.0)) * 100)} % done"

    def waiting_for(self) -> Waiting | None:
        """What a queued job waits for (None once it runs or ended)."""
        return waiting_for(self) if self.status == JobStatus.QUEUED else None

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_STATUSES

    @property
    def is_finished(self) -> bool:
        return self.status in FINAL_STATUSES

    @property
    def duration_s(self) -> float | None:
        if self.started_at is None:
            return None
        return ((self.finished_at or timezone.now()) - self.started_at).total_seconds()


def _task(model: type[Job]) -> Any:
    """The registered task of a job model (its app's ``tasks`` module, imported on first use by the web side)."""
    if model.task_name not in celery_app.tasks:
        import_module(f"{model._meta.app_config.name}.tasks")
    return celery_app.tasks[model.task_name]


def dispatch(job: Job) -> bool:
    """Send the job's task unless it was sent already; False when the broker is down (the job stays
    undispatched for the periodic dispatcher)."""
    model = type(job)
    if model._default_manager.filter(pk=job.pk, dispatched_at__isnull=False).exists():
        return False
    result = send_task(_task(model), args=[job.pk], queue=job.task_queue())
    if result is None:
        return False
    model._default_manager.filter(pk=job.pk).update(dispatched_at=timezone.now(), celery_task_id=result.id)
    return True


def dispatch_on_commit(job: Job) -> None:
    """Send the job's task once the transaction that recorded it commits (a worker must find the row)."""
    transaction.on_commit(lambda: dispatch(job))


def undispatched(model: type[J], *, older_than: timedelta) -> QuerySet[J]:
    """Queued jobs whose task never reached the broker, recorded more than ``older_than`` ago (younger ones
    may still be waiting for their own commit)."""
    return model._default_manager.filter(status=JobStatus.QUEUED, dispatched_at__isnull=True,
                                created_at__lt=timezone.now() - older_than)


def dispatch_pending(model: type[Job], *, older_than: timedelta = timedelta(seconds=30)) -> list[int]:
    """Send every undispatched job of a kind; returns the ids sent."""
    return [job.pk for job in undispatched(model, older_than=older_than) if dispatch(job)]


def claim(model: type[J], job_id: int, *, where: dict[str, Any] | None = None, related: Sequence[str] = (),
          **updates: Any) -> J | None:
    """queued → running for exactly one caller (``where``: further conditions, ``updates``: further values);
    the claimed job (with the ``related`` rows its work reads), or None when it is gone, no longer queued, or
    fails ``where``."""
    claimed = model._default_manager.filter(pk=job_id, status=JobStatus.QUEUED, **(where or {})).update(
        status=JobStatus.RUNNING, started_at=timezone.now(), **updates)
    if not claimed:
        return None
    jobs = model._default_manager.select_related(*related) if related else model._default_manager
    return jobs.get(pk=job_id)


def finish(job: Job, status: str, *, error: str = "", **fields: Any) -> bool:
    """queued or running → a final status, once; returns whether this call did it (``job`` then holds the
    values written)."""
    values: dict[str, Any] = {"status": status, "finished_at": timezone.now(), "error": error[-ERROR_TAIL_CHARS:],
                              **fields}
    done = type(job)._default_manager.filter(pk=job.pk, status__in=ACTIVE_STATUSES).update(**values)
    if done:
        for key, value in values.items():
            setattr(job, key, value)
        _announce(job)
    return bool(done)


def _announce(job: Job) -> None:
    """A campaign's job that succeeded or failed is a domain event (published once the finish commits)."""
    campaign_id = getattr(job, "campaign_id", None)
    if campaign_id is None or job.status not in (JobStatus.SUCCEEDED, JobStatus.FAILED):
        return
    events.emit_on_commit(events.Name.JOB_FINISHED if job.status == JobStatus.SUCCEEDED else events.Name.JOB_FAILED,
                          campaign_id=campaign_id,
                          data={"job": job.pk, "kind": type(job)._meta.model_name, "status": job.status,
                                "error": job.error[-500:]})


def write_progress(model: type[Job], job_id: int, **values: Any) -> None:
    """Progress fields written at once through the progress connection, outside the caller's transaction."""
    if connections[PROGRESS_DATABASE].vendor == "sqlite":
        return  # one writer at a time: the second connection would wait for the caller's own lock
    model._default_manager.using(PROGRESS_DATABASE).filter(pk=job_id).update(**values)


def close_progress_connection() -> None:
    connections[PROGRESS_DATABASE].close()


@dataclass(frozen=True)
class Waiting:
    """Why a queued job has not started: the jobs holding its queue's workers, the queued jobs ahead of it."""

    queue: str
    blocking: list[Job]
    ahead: int
    sent: bool
    #: seconds since the job was recorded: a worker normally takes it within a few
    age_s: float

    @property
    def words(self) -> str:
        if self.age_s < STARTING_GRACE_S and not self.blocking and not self.ahead:
            return f"starting: a worker on the {self.queue} queue takes it in a moment"
        if not self.sent:
            return "its task has not reached the broker yet; it is sent again within a minute"
        if self.blocking:
            behind = "; ".join(f"{job._meta.verbose_name} {job.pk}, {job.progress_words()}" for job in self.blocking)
            more = f" and {self.ahead} queued job{'s' if self.ahead != 1 else ''} before it" if self.ahead else ""
            return f"waiting behind {behind}{more}"
        if self.ahead:
            return f"waiting behind {self.ahead} queued job{'s' if self.ahead != 1 else ''} on the {self.queue} queue"
        return (f"waiting for a worker on the {self.queue} queue to take it (no job is running there: "
                f"is a worker serving the {self.queue} queue?)")

    @property
    def links(self) -> list[tuple[str, str]]:
        """(words, URL) of each blocking job's page; the page of a job that can be cancelled holds its Cancel."""
        return [(f"{'Cancel ' if hasattr(job, 'cancel_requested') else 'See '}{job._meta.verbose_name} {job.pk}",
                 job.get_absolute_url()) for job in self.blocking if hasattr(job, "get_absolute_url")]


def waiting_for(job: Job) -> Waiting:
    """The running jobs of every kind that hold a worker of ``job``'s queue, and the queued ones sent before it.

    Each queue has its own workers (``steplab.celery.WORKER_QUEUES``), so only jobs on the same queue can hold
    it up; a kind's rows are few while active, so the queue (which may depend on the row) is checked in Python.
    """
    queue = job.queue_name()
    blocking: list[Job] = []
    ahead = 0
    for model in apps.get_models():
        if not issubclass(model, Job) or not model.holds_worker:
            continue
        active = model._default_manager.filter(status__in=ACTIVE_STATUSES).order_by("created_at", "pk")
        for other in active:
            if other.queue_name() != queue or (type(other) is type(job) and other.pk == job.pk):
                continue
            if other.status == JobStatus.RUNNING:
                blocking.append(other)
            elif other.dispatched_at is not None and other.created_at < job.created_at:
                ahead += 1
    return Waiting(queue=queue, blocking=blocking, ahead=ahead, sent=job.dispatched_at is not None,
                   age_s=(timezone.now() - job.created_at).total_seconds())
