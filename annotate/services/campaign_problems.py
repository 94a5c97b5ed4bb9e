"""Problems are owned by a campaign: every importer finds and creates them through these functions only.

A campaign admin's imports read and write the problems of their campaign and nothing else, so nothing they do
changes what another campaign's labelers, exports or models see; a reference to another campaign's problem is
"unknown", word for word like one that does not exist. ``campaign`` NULL is the staff-only bank, which
``manage.py import_problems`` fills when no ``--campaign`` is given: a bank problem is copied into a campaign
the first time one of its imports references it.

Who may reach the bank (``annotate.permissions.can_reference_problem_bank``): active staff and ``SYSTEM`` (commands,
the demo loader). Every entry point runs its import inside ``bank_access(actor)``; outside one the bank is closed,
so an import whose entry point forgot to say who it acts for sees a bank problem as "not a known problem of this
campaign", like any other, and a guessable ``unique_id`` never copies the bank's text, answer and solution in.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.db.models import Q, QuerySet

from .. import permissions
from ..models import Campaign, Problem

UNKNOWN_PROBLEM = "{value!r} is not a known problem of this campaign (import it first)"
# Set by each import's entry point from its actor; every importer below it reads it. Closed unless set.
_bank_reachable: ContextVar[bool] = ContextVar("bank_reachable", default=False)


@contextmanager
def bank_access(actor: permissions.Actor) -> Iterator[None]:
    """Imports inside this block act for ``actor``: they reach the staff bank only if it may
    (``can_reference_problem_bank``)."""
    token = _bank_reachable.set(permissions.can_reference_problem_bank(actor))
    try:
        yield
    finally:
        _bank_reachable.reset(token)


def owned_problems(campaign: Campaign | None) -> QuerySet[Problem]:
    """The problems a campaign owns (``None``: the staff-only bank). Every importer reads through this."""
    if campaign is None:
        return Problem.objects.filter(campaign__isnull=True)
    return Problem.objects.filter(campaign=campaign)


def new_problem(campaign: Campaign | None, text: str, **fields: Any) -> Problem:
    """An unsaved problem with its digests set (``bulk_insert`` does not call ``save``)."""
    problem = Problem(campaign=campaign, text=text, **fields)
    problem.set_digests()
    return problem


def resolve_problems(campaign: Campaign | None, *, source_ids: Iterable[str] = (), keys: Iterable[str] = (),
                     copy_from_bank: bool = True) -> tuple[dict[str, Problem], dict[str, Problem]]:
    """The campaign's problems with these ``unique_id``s / normalised-text keys, as (by source id, by key).

    A reference the campaign does not hold is looked up in the staff bank and, found there, copied into the
    campaign (first use; ``copy_from_bank=False`` only reports the bank row, for a check that writes nothing).
    Other campaigns' problems are never read: to a caller they do not exist.
    """
    source_ids, keys = {s for s in source_ids if s}, set(keys)
    by_source: dict[str, Problem] = {}
    by_key: dict[str, Problem] = {}

    def load() -> None:
        if not source_ids and not keys:
            return
        for problem in owned_problems(campaign).filter(Q(source_id__in=source_ids) | Q(key_sha256__in=keys)):
            by_key[problem.key_sha256] = problem
            if problem.source_id:
                by_source[problem.source_id] = problem

    load()
    missing_ids, missing_keys = source_ids - by_source.keys(), keys - by_key.keys()
    if campaign is None or not (missing_ids or missing_keys) or not _bank_reachable.get():
        return by_source, by_key
    bank = list(owned_problems(None).filter(Q(source_id__in=missing_ids) | Q(key_sha256__in=missing_keys)))
    if not copy_from_bank:
        for problem in bank:
            by_key.setdefault(problem.key_sha256, problem)
            if problem.source_id:
                by_source.setdefault(problem.source_id, problem)
        return by_source, by_key
    copies = [new_problem(campaign, p.text, answer=p.answer, solution=p.solution, subject=p.subject,
                          level=p.level, source_id=p.source_id) for p in bank]
    if copies:
        # A copy that would clash with a row the campaign already has (same text under another id) is skipped:
        # the reference then means the campaign's own row of that text.
        Problem.objects.bulk_create(copies, ignore_conflicts=True)
        keys |= {problem.key_sha256 for problem in bank}
        load()
        for problem in bank:
            if problem.source_id and problem.source_id not in by_source and problem.key_sha256 in by_key:
                by_source[problem.source_id] = by_key[problem.key_sha256]
    return by_source, by_key
