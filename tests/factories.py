"""factory_boy factories for the rows tests build by hand, and the few builders composed of them.

Defaults are the smallest valid row; a test names only the fields its assertions are about. The builders at
the end make what several test areas need in one call (a solution with its steps, a finished labeling, an
exported dataset version), each with one meaning.
"""
from __future__ import annotations

import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import factory
from django.conf import settings
from django.utils import timezone
from factory.django import DjangoModelFactory

from annotate.models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    Completion,
    FinishReason,
    ImportJob,
    ImportKind,
    Membership,
    Problem,
    Rating,
    Role,
    Solution,
    Step,
    StepDecision,
)
from rewards.jobs.models import (
    Candidate,
    CandidatePool,
    CandidateScore,
    Kind,
    PoolProblem,
    RewardModel,
    SamplingJob,
    ScoringJob,
    TrainingJob,
)
from rewards.models import DatasetVersion

PASSWORD = "pw-Steplab-1"


class UserFactory(DjangoModelFactory):
    class Meta:
        model = settings.AUTH_USER_MODEL

    username = factory.Sequence(lambda n: f"user{n}")
    password = PASSWORD

    @classmethod
    def _create(cls, model_class: Any, *args: Any, **kwargs: Any) -> Any:
        """Through ``create_user``, as accounts are made on the site: the password is hashed and can log in."""
        return model_class.objects.create_user(*args, **kwargs)


class CampaignFactory(DjangoModelFactory):
    class Meta:
        model = Campaign

    slug = factory.Sequence(lambda n: f"campaign-{n}")
    name = factory.LazyAttribute(lambda campaign: campaign.slug)


class MembershipFactory(DjangoModelFactory):
    class Meta:
        model = Membership

    campaign = factory.SubFactory(CampaignFactory)
    user = factory.SubFactory(UserFactory)
    role = Role.LABELER


class ProblemFactory(DjangoModelFactory):
    """A bank problem (no campaign); the text is unique, as the bank's constraint asks."""

    class Meta:
        model = Problem

    text = factory.Sequence(lambda n: f"Factory problem {n}: what is $2+2$?")
    answer = "4"


class SolutionFactory(DjangoModelFactory):
    """``steps=[...]`` adds the steps: a text per step (stepwise) or a list of candidate texts (conversational)."""

    class Meta:
        model = Solution
        skip_postgeneration_save = True  # the steps hook writes other rows, never the solution itself

    campaign = factory.SubFactory(CampaignFactory)
    problem = factory.SubFactory(ProblemFactory)

    @factory.post_generation
    def steps(solution: Solution, create: bool, extracted: list[str] | list[list[str]] | None,
              **kwargs: Any) -> None:
        for index, texts in enumerate(extracted or []):
            step = StepFactory(solution=solution, index=index)
            for position, text in enumerate([texts] if isinstance(texts, str) else texts):
                CompletionFactory(step=step, index=position, text=text)


class StepFactory(DjangoModelFactory):
    class Meta:
        model = Step

    solution = factory.SubFactory(SolutionFactory)
    index = 0


class CompletionFactory(DjangoModelFactory):
    class Meta:
        model = Completion

    step = factory.SubFactory(StepFactory)
    index = 0
    text = factory.Sequence(lambda n: f"Step text {n}.")


class AssignmentFactory(DjangoModelFactory):
    """A finished labeling by default (the leased state is what the lease service makes, not a factory)."""

    class Meta:
        model = Assignment

    solution = factory.SubFactory(SolutionFactory)
    labeler = factory.SubFactory(UserFactory)
    status = AssignmentStatus.SUBMITTED
    finish_reason = FinishReason.SOLUTION
    finished_at = factory.LazyFunction(timezone.now)


class RatingFactory(DjangoModelFactory):
    class Meta:
        model = Rating

    assignment = factory.SubFactory(AssignmentFactory)
    completion = factory.SubFactory(CompletionFactory)
    rating = 1


class StepDecisionFactory(DjangoModelFactory):
    class Meta:
        model = StepDecision

    assignment = factory.SubFactory(AssignmentFactory)
    step = factory.SubFactory(StepFactory)
    chosen_completion = 0


class DatasetVersionFactory(DjangoModelFactory):
    """A ready version row; its files are whatever the test puts in ``files`` (see ``exported_version``)."""

    class Meta:
        model = DatasetVersion

    campaign = factory.SubFactory(CampaignFactory)
    number = 1
    status = DatasetVersion.Status.READY
    content_sha256 = factory.LazyFunction(lambda: uuid.uuid4().hex)
    folder = factory.LazyAttribute(lambda version: f"datasets/{version.campaign.slug}/v{version.number}")


class ImportJobFactory(DjangoModelFactory):
    """An upload row as the manage pages list it; no worker runs it unless the test dispatches it."""

    class Meta:
        model = ImportJob

    campaign = factory.SubFactory(CampaignFactory)
    kind = ImportKind.PROBLEMS
    original_name = "x.jsonl"
    file = factory.LazyAttribute(lambda job: f"imports/{job.original_name}")


class TrainingJobFactory(DjangoModelFactory):
    """A queued PRM training row; campaign and dataset version stay empty unless the test names them, as a
    job started from a file has none."""

    class Meta:
        model = TrainingJob

    kind = Kind.PRM
    dataset_path = "/x.jsonl"


class RewardModelFactory(DjangoModelFactory):
    """A registered model; its training job is made to match (same kind, campaign and dataset version)."""

    class Meta:
        model = RewardModel

    kind = Kind.PRM
    campaign = None
    dataset_version = None
    job = factory.SubFactory(TrainingJobFactory, kind=factory.SelfAttribute("..kind"),
                             campaign=factory.SelfAttribute("..campaign"),
                             dataset_version=factory.SelfAttribute("..dataset_version"))
    name = factory.Sequence(lambda n: f"model-{n}")
    location = "/nonexistent"
    base_model = "tiny"


class CandidatePoolFactory(DjangoModelFactory):
    """A pool row with its counts as given (no problems or candidates unless the test adds them)."""

    class Meta:
        model = CandidatePool

    name = factory.Sequence(lambda n: f"pool-{n}-{uuid.uuid4().hex[:6]}")
    campaign = factory.SubFactory(CampaignFactory)
    problem_count = 1
    candidate_count = 4
    pool_size = 4


class PoolProblemFactory(DjangoModelFactory):
    class Meta:
        model = PoolProblem

    pool = factory.SubFactory(CandidatePoolFactory)
    problem = factory.SubFactory(ProblemFactory)
    index = 0


class CandidateFactory(DjangoModelFactory):
    class Meta:
        model = Candidate

    pool_problem = factory.SubFactory(PoolProblemFactory)
    index = 0
    text = factory.Sequence(lambda n: f"Candidate {n}. The answer is 4.")


class ScoringJobFactory(DjangoModelFactory):
    class Meta:
        model = ScoringJob

    reward_model = factory.SubFactory(RewardModelFactory)
    pool = factory.SubFactory(CandidatePoolFactory)


class CandidateScoreFactory(DjangoModelFactory):
    class Meta:
        model = CandidateScore

    scoring_job = factory.SubFactory(ScoringJobFactory)
    candidate = factory.SubFactory(CandidateFactory)
    score = 0.5


class SamplingJobFactory(DjangoModelFactory):
    class Meta:
        model = SamplingJob

    campaign = factory.SubFactory(CampaignFactory)


# --- builders ------------------------------------------------------------------------------------------------

def solution_with_steps(campaign: Campaign, steps: list[str] | list[list[str]], *, problem_text: str | None = None,
                        answer: str = "12", **fields: Any) -> Solution:
    """A solution whose steps are given as texts (stepwise) or lists of candidate texts (conversational)."""
    text = problem_text or f"Problem {Problem.objects.count() + 1}: what is $3 \\times 4$?"
    return SolutionFactory(campaign=campaign, problem=ProblemFactory(text=text, answer=answer), steps=steps, **fields)


def numbered_solution(campaign: Campaign, n_steps: int = 4, **fields: Any) -> Solution:
    """A solution of ``n_steps`` one-completion steps ("Step 1 of solution <pk>.", …) to a fresh problem."""
    problem = ProblemFactory(text=f"Problem {Problem.objects.count() + 1}: what is $2+{n_steps}$?",
                             answer=str(2 + n_steps))
    solution = SolutionFactory(campaign=campaign, problem=problem, **fields)
    for index in range(n_steps):
        CompletionFactory(step=StepFactory(solution=solution, index=index), index=0,
                          text=f"Step {index + 1} of solution {solution.pk}.")
    return solution


def finished_labeling(solution: Solution, user: Any, ratings: list[int | None], reason: str | None = None, *,
                      finished_at: datetime | None = None, total_time_ms: int | None = None,
                      step_time_ms: int | None = None, is_gold: bool = False) -> Assignment:
    """A submitted labeling: ratings on the first completion of steps 0, 1, …; the reason follows the ratings."""
    if reason is None:
        reason = FinishReason.FOUND_ERROR if -1 in ratings else FinishReason.SOLUTION
    assignment = AssignmentFactory(solution=solution, labeler=user, finish_reason=reason,
                                   finished_at=finished_at or timezone.now(), total_time_ms=total_time_ms,
                                   is_gold=is_gold)
    completions = Completion.objects.filter(step__solution=solution, index=0).select_related("step").order_by(
        "step__index")
    for completion, rating in zip(completions, ratings, strict=False):  # a labeling may stop before the last step
        RatingFactory(assignment=assignment, completion=completion, rating=rating, time_ms=step_time_ms)
        # as record_rating does in stepwise mode: a rated step is the one the labeler continued with
        StepDecisionFactory(assignment=assignment, step=completion.step)
    return assignment


def exported_version(campaign: Campaign, *, test_fraction: float = 0.3, seed: int = 3,
                     number: int = 1) -> DatasetVersion:
    """Export a campaign's labels (trl-stepwise and outcome) into storage and record a ready version for them."""
    from django.core.files.storage import default_storage

    from rewards.exports import ExportOptions, export_campaign

    folder = f"test-versions/{campaign.slug}-{uuid.uuid4().hex[:8]}/v{number}"
    files = {}
    for fmt in ("trl-stepwise", "outcome"):
        name = f"{folder}/{fmt}.jsonl"
        written = export_campaign(campaign, fmt, Path(default_storage.path(name)),
                                  ExportOptions(seed=seed, test_fraction=test_fraction))
        files[fmt] = {"name": name, "sha256": written.sha256, "bytes": written.size, "rows": written.rows}
    return DatasetVersionFactory(campaign=campaign, number=number, folder=folder, files=files)
