"""Re-splitting a solution's steps: the admin's answer to "bad split" reports.

Before any rating exists (no rating with a value, no submitted pass) the steps are replaced in place: nobody's
labels refer to the old boundaries. Open leases on it are released (expired, their slots given back), so a
labeler whose page still shows the old steps gets the usual "lease expired" answer instead of rating a step
they never saw. After ratings exist the labels must keep meaning what they meant: a NEW solution gets the new
steps (``provenance["resplit_from"]``) and the old one keeps its labels, records ``provenance["resplit_into"]``
and is no longer leased for new work.
"""
from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as AuthUser
from django.db import transaction

from .. import permissions
from ..models import RESPLIT_FROM, RESPLIT_INTO, Assignment, AssignmentStatus, Completion, Rating, Solution, Step
from ..prm800k import content_digest

User = AuthUser | AnonymousUser


class ResplitError(Exception):
    """A re-split the rules refuse; ``field`` names the input at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ResplitOutcome:
    solution: Solution  # the solution that now has the new steps
    in_place: bool  # True: the old solution's steps were replaced; False: ``solution`` is a new one
    released_leases: int = 0


def steps_from_text(text: str) -> list[str]:
    """The admin's textarea: steps separated by blank lines (a step keeps its own single line breaks)."""
    blocks, current = [], []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line.strip():
            current.append(line.rstrip())
        elif current:
            blocks.append("\n".join(current))
            current = []
    if current:
        blocks.append("\n".join(current))
    return blocks


def current_steps(solution: Solution) -> list[str]:
    """The solution's step texts (completion 0 of each step), in order."""
    return list(Completion.objects.filter(step__solution=solution, index=0).order_by("step__index")
                .values_list("text", flat=True))


def has_ratings(solution: Solution) -> bool:
    """Labels refer to these steps: a rating with a value, or a submitted pass."""
    return (Rating.objects.filter(assignment__solution=solution, rating__isnull=False).exists()
            or Assignment.objects.filter(solution=solution, status=AssignmentStatus.SUBMITTED).exists())


def _check_steps(solution: Solution, steps: list[str]) -> list[str]:
    steps = [step.strip() for step in steps]
    if not steps:
        raise ResplitError("steps", "Give at least one step.")
    empty = next((n for n, step in enumerate(steps, 1) if not step), None)
    if empty is not None:
        raise ResplitError("steps", f"Step {empty} is empty.")
    if len(steps) > settings.STEPLAB_MAX_STEPS_PER_SOLUTION:
        raise ResplitError("steps", f"{len(steps)} steps; the limit is {settings.STEPLAB_MAX_STEPS_PER_SOLUTION}.")
    too_long = next((n for n, step in enumerate(steps, 1) if len(step) > settings.STEPLAB_MAX_STEP_CHARS), None)
    if too_long is not None:
        raise ResplitError("steps", f"Step {too_long} is longer than {settings.STEPLAB_MAX_STEP_CHARS} characters.")
    if steps == current_steps(solution):
        raise ResplitError("steps", "These are the solution's steps as they are: nothing to re-split.")
    return steps


def _write_steps(solution: Solution, steps: list[str]) -> None:
    made = Step.objects.bulk_create([Step(solution=solution, index=i) for i in range(len(steps))])
    Completion.objects.bulk_create([Completion(step=step, index=0, text=text)
                                    for step, text in zip(made, steps, strict=True)])


def resplit_solution(*, solution_id: int, steps: list[str], user: User) -> ResplitOutcome:
    """Give the solution these steps (see the module docstring for in place versus a new solution)."""
    with transaction.atomic():
        solution = (Solution.objects.select_for_update(of=("self",)).select_related("campaign", "problem")
                    .filter(pk=solution_id).first())
        if solution is None:
            raise ResplitError("solution", f"There is no solution {solution_id}.")
        if not permissions.can_resplit(user, solution.campaign):
            raise ResplitError("solution", "Only the campaign's admins and staff can re-split its solutions.")
        if RESPLIT_INTO in solution.provenance:
            raise ResplitError("solution", f"Solution {solution.pk} was already re-split into solution "
                                           f"{solution.provenance[RESPLIT_INTO]}: re-split that one instead.")
        if Completion.objects.filter(step__solution=solution, index__gt=0).exists():
            raise ResplitError("solution", "This solution has several candidate completions per step "
                                           "(conversational): only single-completion steps can be re-split.")
        steps = _check_steps(solution, steps)
        digest = content_digest(solution.problem.text, steps)
        pre_generated = steps if solution.pre_generated_steps is not None else None
        if not has_ratings(solution):
            released = list(Assignment.objects.select_for_update().filter(solution=solution,
                                                                          status=AssignmentStatus.LEASED)
                            .values_list("pk", flat=True))
            if released:
                Assignment.objects.filter(pk__in=released).update(status=AssignmentStatus.EXPIRED)
            Step.objects.filter(solution=solution).delete()  # with their completions, flags and split reports
            _write_steps(solution, steps)
            solution.pre_generated_steps = pre_generated
            solution.content_sha256 = digest
            solution.label_count = max(0, solution.label_count - len(released))
            solution.save(update_fields=["pre_generated_steps", "content_sha256", "label_count"])
            return ResplitOutcome(solution, in_place=True, released_leases=len(released))
        successor = Solution.objects.create(
            campaign=solution.campaign, problem=solution.problem, generator=solution.generator,
            sample_index=solution.sample_index, final_answer=solution.final_answer, is_correct=solution.is_correct,
            verifier_score=solution.verifier_score, generation=solution.generation,
            is_quality_control=solution.is_quality_control, is_screening=solution.is_screening,
            # The gold first error is a step index of the old boundaries: it does not carry over.
            gold_first_error=None, pre_generated_steps=pre_generated,
            provenance={**solution.provenance, RESPLIT_FROM: solution.pk}, source_extra={},
            content_sha256=digest)
        _write_steps(successor, steps)
        solution.provenance = {**solution.provenance, RESPLIT_INTO: successor.pk}
        solution.save(update_fields=["provenance"])
        return ResplitOutcome(successor, in_place=False)

