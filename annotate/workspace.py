"""The labeler's workspace, read: a pass's steps, ratings, decisions and progress.

This read refuses with the services' own labeling errors (``annotate.services.errors``): not your assignment, not an
active labeler.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as AuthUser
from django.db.models import Exists, F, OuterRef

from . import permissions
from .models import Assignment, Completion, MachineLabel, Rating, SplitReport, Step, StepDecision
from .scales import PM1, Scale, campaign_scale
from .services.errors import NotAllowed
from .services.suggestions import step_suggestions

User = AuthUser | AnonymousUser


@dataclass(frozen=True)
class Progress:
    total: int
    done: int  # stepwise: steps rated; conversational: steps with a continuation
    first_open: int  # index of the first step still to do (== total when none)
    has_error: bool
    first_error: int | None = None  # stepwise: the step rated −1 (every later step is locked)

    @property
    def submittable(self) -> bool:
        """The pass can be submitted: every step done, or (stepwise) a −1 that ends it."""
        return self.has_error or self.done >= self.total

    def step_state(self, index: int, *, stepwise: bool, is_open: bool) -> str:
        """What the labeler may do with step ``index`` now: ``open`` (rate it), ``locked`` (an earlier step comes
        first) or ``done`` (read only: the pass is closed). Stepwise, every step up to the first one to rate can
        change; after a −1, only up to the −1 (the rest stays locked until that −1 changes). Conversational,
        only the first step without a continuation is open."""
        if not is_open:
            return "done"
        if stepwise:
            last = self.first_error if self.first_error is not None else self.first_open
            return "open" if index <= last else "locked"
        return "open" if index == self.first_open else ("locked" if index > self.first_open else "done")


@dataclass(frozen=True)
class Continuations:
    """Conversational mode: how a step whose candidates were rated may be continued (``decide_step``'s rule)."""

    all_rated: bool
    choosable: frozenset[int]  # rated, and not −1
    can_write: bool  # one's own step, when no candidate is rated +1

    @property
    def can_choose(self) -> bool:
        return self.all_rated


def continuations(ratings: dict[int, int | None], scale: Scale = PM1) -> Continuations:
    """``ratings``: each candidate's index and rating (None: not rated yet). A candidate rated an error cannot
    be continued with; one rated the scale's top value (+1) leaves no reason to write one's own step."""
    all_rated = all(value is not None for value in ratings.values())
    top = max(scale.allowed)
    return Continuations(all_rated=all_rated,
                         choosable=frozenset(index for index, value in ratings.items()
                                             if value is not None and not scale.is_error(value)),
                         can_write=all_rated and not any(value == top for value in ratings.values()))


@dataclass(frozen=True)
class StepContent:
    index: int
    completions: list[Completion]  # by index
    split_reported: bool = False  # this labeler flagged the step as a bad split


@dataclass(frozen=True)
class Workspace:
    """Everything the workspace shows for one assignment, loaded in a fixed number of queries.

    ``steps`` may be a few of the solution's steps (the rows a write re-renders); ``ratings``,
    ``decisions`` and ``progress`` always cover the whole pass.
    """

    assignment: Assignment
    steps: list[StepContent]
    ratings: dict[tuple[int, int], Rating]  # (step index, completion index) -> rating
    decisions: dict[int, StepDecision]  # step index -> decision
    progress: Progress
    # step index -> machine labels, filled only where the campaign shows them (annotate.services.suggestions)
    suggestions: dict[int, list[MachineLabel]] = field(default_factory=dict)


def step_contents(assignment: Assignment, step_indexes: list[int] | None) -> list[StepContent]:
    """The steps' texts and the labeler's bad-split flags in one query (every step has its completion 0, so none
    is missed; the flag is a subquery, not a query of its own, on the rating's hot path)."""
    reported = SplitReport.objects.filter(assignment_id=assignment.pk, step_id=OuterRef("step_id"))
    completions = (Completion.objects.filter(step__solution_id=assignment.solution_id)
                   .annotate(step_index=F("step__index"), split_reported=Exists(reported))
                   .order_by("step__index", "index"))
    if step_indexes is not None:
        completions = completions.filter(step__index__in=step_indexes)
    steps: list[StepContent] = []
    for completion in completions:
        if not steps or steps[-1].index != completion.step_index:
            steps.append(StepContent(completion.step_index, [], completion.split_reported))
        steps[-1].completions.append(completion)
    return steps


def ratings_of(assignment: Assignment) -> dict[tuple[int, int], Rating]:
    ratings = Rating.objects.filter(assignment=assignment).annotate(
        step_index=F("completion__step__index"), completion_index=F("completion__index"))
    return {(r.step_index, r.completion_index): r for r in ratings}


def decisions_of(assignment: Assignment) -> dict[int, StepDecision]:
    decisions = StepDecision.objects.filter(assignment=assignment).annotate(step_index=F("step__index"))
    return {d.step_index: d for d in decisions}


def rated_steps(ratings: dict[tuple[int, int], Rating]) -> dict[int, int]:
    """Stepwise: step index -> the rating given to its step text (completion 0), for the steps rated."""
    return {step: r.rating for (step, completion), r in ratings.items() if completion == 0 and r.rating is not None}


def pass_progress(total: int, stepwise: bool, ratings: dict[tuple[int, int], Rating],
              decisions: dict[int, StepDecision], errors: frozenset[int] = PM1.error_values) -> Progress:
    """How far a pass is, from its ratings (stepwise; ``errors``: the scale's error values) or its decisions
    (conversational)."""
    first_error = None
    if stepwise:
        rated = rated_steps(ratings)
        done_indexes = set(rated)
        first_error = min((index for index, value in rated.items() if value in errors), default=None)
    else:
        done_indexes = {index for index, d in decisions.items() if d.is_decided}
    first_open = next((index for index in range(total) if index not in done_indexes), total)
    return Progress(total=total, done=len(done_indexes), first_open=first_open, has_error=first_error is not None,
                    first_error=first_error)


def load_workspace(assignment_id: int, user: User, *, step_indexes: list[int] | None = None,
                   checked: Assignment | None = None) -> Workspace:
    """The labeler's own assignment with its steps (all, or only ``step_indexes``), ratings and decisions.

    ``checked`` is the same assignment as a write service just loaded and authorised (owner, active
    membership) in this request; passing it saves the two queries that would check it again.
    """
    if checked is not None and checked.pk == assignment_id and permissions.owns_assignment(user, checked):
        assignment = checked
    else:
        found = (Assignment.objects.select_related("solution__campaign", "solution__problem")
                 .filter(pk=assignment_id).first())
        permissions.require(permissions.owns_assignment, user, found, "This is not your assignment.", error=NotAllowed)
        assert found is not None  # owns_assignment refuses None
        assignment = found
        permissions.require(permissions.can_label, user, assignment.solution.campaign,
                            "You are not an active labeler in this campaign.", error=NotAllowed)
    stepwise = assignment.solution.campaign.is_stepwise
    steps = step_contents(assignment, step_indexes)
    total = len(steps) if step_indexes is None else Step.objects.filter(solution_id=assignment.solution_id).count()
    ratings, decisions = ratings_of(assignment), decisions_of(assignment)
    suggestions = step_suggestions(assignment.solution.campaign, assignment.solution, step_indexes)
    errors = campaign_scale(assignment.solution.campaign).error_values
    return Workspace(assignment, steps, ratings, decisions, pass_progress(total, stepwise, ratings, decisions, errors),
                     suggestions)
