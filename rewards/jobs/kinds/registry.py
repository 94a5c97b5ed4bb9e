"""The job-kind registry: one ``JobKind`` declaration per kind of work, read by everything that handles kinds alike.

Readers: the runner's periodic dispatcher (``services.runner.dispatch_undispatched``: launched kinds), the reaper
(``tasks.reap_stale_jobs``: every kind's ``reap``), the Celery task of each kind (made here by ``register``: the
kind's ``run`` then its ``after`` follow-ups), the generic work pages (``views.work_*`` and ``urls``: kinds with a
``page``) and the jobs API (``api.routes``: every kind's ``routes``). Adding a kind is one module in this package
that calls ``register`` (the package imports each of its modules); none of the readers changes.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import import_module
from operator import attrgetter
from pkgutil import iter_modules
from typing import TYPE_CHECKING, Any

from celery import shared_task

from rewards.jobs import kinds as kinds_package

if TYPE_CHECKING:
    from annotate.models import Campaign

    from ..services.runner import JobHooks

#: an API route: (path under /api/ with ``{campaign}`` for the campaign's id, the view, the route's name)
Route = tuple[str, Any, str]


@dataclass(frozen=True)
class JobKind:
    """What a kind of work is and how the shared machinery handles it."""

    #: its key in the reaper's answer and in this registry
    name: str
    #: its rows (a ``steplab.jobs.Job`` declares ``task_name``, the name its task is registered under)
    model: type[Any]
    #: the service that starts one (what pages and API call), named here so a reader finds it from the kind
    start: Callable[..., Any]
    #: the body of its Celery task (registered under ``model.task_name``), given the job's id; None: no task
    run: Callable[[int], str | None] | None = None
    #: a launched job's launch, progress and success handling: the runner watches, re-sends and reaps it
    hooks: Callable[[Any], JobHooks] | None = None
    #: a kind that is not launched: its own periodic reconciler (ids it moved on)
    reconcile: Callable[[], list[int]] | None = None
    #: follow-ups once its task's ``run`` returned (given the job's id): other work that waited on this job
    after: tuple[Callable[[int], object], ...] = ()
    #: the path segment of its generic work page under /models/ (``scoring`` → /models/scoring/<pk>/); "" = none
    page: str = ""
    #: the page's title ("Scoring job 3")
    title: str = ""
    #: the rows a page of one job reads with it
    related: tuple[str, ...] = ()
    #: the campaign whose researchers may see a job
    campaign_of: Callable[[Any], Campaign | None] = field(default=attrgetter("campaign"))
    #: its routes in the jobs API
    routes: tuple[Route, ...] = ()
    #: its Celery task, set by ``register``
    task: Any = field(default=None, compare=False)

    @property
    def launched(self) -> bool:
        return self.hooks is not None

    def reap(self) -> list[int]:
        """The periodic reaper's work for this kind: stale launched jobs, or the kind's own reconciler."""
        from ..services import runner

        if self.hooks is not None:
            return runner.reap(self.model, self.hooks)
        return self.reconcile() if self.reconcile is not None else []


_KINDS: dict[str, JobKind] = {}
_loaded = False


def register(kind: JobKind) -> JobKind:
    """Add a kind (its name unused so far) and make its Celery task; the kind as registered."""
    if kind.name in _KINDS:
        raise ValueError(f"job kind {kind.name!r} is registered already")
    if kind.run is not None:
        object.__setattr__(kind, "task", _task(kind))
    _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a kind (a test's own kind, once it is done)."""
    _KINDS.pop(name, None)


def _task(kind: JobKind) -> Any:
    run = kind.run
    assert run is not None

    def run_job(job_id: int) -> str | None:
        status = run(job_id)
        for follow in kind.after:
            follow(job_id)
        return status

    run_job.__name__ = run_job.__qualname__ = f"run_{kind.name}"
    return shared_task(name=kind.model.task_name, acks_late=True, ignore_result=True)(run_job)


def load() -> None:
    """Import every module of this package once: each registers its kind. Not at the package's import: the
    kinds import the services and API views, which import the runner, which reads this registry."""
    global _loaded
    if not _loaded:
        _loaded = True
        for module in iter_modules(kinds_package.__path__):
            if module.name != "registry":
                import_module(f"{kinds_package.__name__}.{module.name}")


def kinds() -> Iterator[JobKind]:
    """Every registered kind, in registration order (the built-in ones are registered on first use)."""
    load()
    return iter(list(_KINDS.values()))


def get(name: str) -> JobKind:
    load()
    return _KINDS[name]


def pages() -> dict[str, JobKind]:
    """The kinds with a generic work page, by its path segment."""
    return {kind.page: kind for kind in kinds() if kind.page}
