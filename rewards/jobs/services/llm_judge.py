"""LLM-judge jobs: a served model judges chosen solutions of a campaign, one request per solution, in the worker.

Each solution goes to the job's endpoint with the campaign's domain template (``rewards.served.judge``) through
``ChatClient`` (retries, backoff and ``Retry-After`` are the client's), holding one of the endpoint's concurrency
slots per request. Its verdict is recorded at once, in its own transaction, as the source
``llm:<model>@<template version>`` (steps before the judged first error 1, that step 0, later ones unlabeled), the
reason in the first error's provenance; an answer the parser cannot read is listed as unparsable, never guessed.

A stop keeps every finished solution: a cancel, a spent token budget or a server that went away ends the job
(cancelled or failed) with ``resumable`` set, and ``resume_llm_judge_job`` queues it again to judge only the
solutions not yet judged (neither labeled by its source nor listed unparsable). The key reaches the worker only
through the endpoint row it decrypts in process (``endpoints.selectors.served_model_for``): the broker message
holds the job's id, and the job has no folder.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta

from django.db.models import Count, F
from django.utils import timezone

from annotate.labelsources.llm import LLM, source_name
from annotate.models import Campaign, Completion, MachineLabel, Solution
from annotate.permissions import Actor, account_of, can_start_machine_labeling, require
from annotate.scales import campaign_scale
from annotate.services.machine_labels import StepValue, record_machine_labels
from endpoints import concurrency
from endpoints.models import Endpoint
from endpoints.selectors import served_model_for, usable_endpoints
from rewards.served.client import ChatClient, ServedError, ServedRejected, ServedUnavailable
from rewards.served.client import Completion as ChatCompletion
from rewards.served.judge import (
    TEMPLATES,
    JudgeTemplate,
    Verdict,
    describe_scale,
    parse_verdict,
    step_values,
    template_for,
)
from steplab import jobs

from ..models import JobStatus, LlmJudgeJob
from . import runner
from .training import JobInputError

DEFAULT_SOLUTIONS = 20
MAX_SOLUTIONS = 5000
DEFAULT_MAX_TOKENS = 512
MAX_MAX_TOKENS = 8192
#: solutions whose steps are read from the database at once
CHUNK = 100
#: refusals in a row that say the endpoint refuses the job, not one solution: nothing of them is recorded
REFUSED_IN_A_ROW = 3


def choose_solutions(campaign: Campaign, *, limit: int, solution_ids: Sequence[int] | None = None) -> list[int]:
    """Regular solutions with steps (never gold or screening), the ones named or else those labeled least first."""
    solutions = (Solution.objects.filter(campaign=campaign, is_quality_control=False, is_screening=False)
                 .annotate(steps_n=Count("steps")).filter(steps_n__gt=0))
    if solution_ids is not None:
        return list(solutions.filter(pk__in=list(solution_ids)).order_by("pk").values_list("pk", flat=True)[:limit])
    return list(solutions.order_by("label_count", "pk").values_list("pk", flat=True)[:limit])


def _whole_number(value: object, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise JobInputError(field, f"must be a whole number from {low} to {high}, got {value!r}")
    return value


def start_llm_judge_job(*, campaign: Campaign, endpoint: Endpoint, user: Actor, limit: int = DEFAULT_SOLUTIONS,
                        solution_ids: Sequence[int] | None = None, template_version: str = "",
                        max_tokens: int = DEFAULT_MAX_TOKENS) -> LlmJudgeJob:
    """Validate and queue a judge job; errors name the input at fault (``JobInputError.field``)."""
    require(can_start_machine_labeling, user, campaign,
            f"only staff and admins of campaign {campaign.slug} start machine labeling jobs")
    if endpoint.pk not in set(usable_endpoints(user, campaign).values_list("pk", flat=True)):
        raise JobInputError("endpoint", f"no endpoint {endpoint.pk} you may use in campaign {campaign.slug}")
    _whole_number(limit, "solutions", 1, MAX_SOLUTIONS)
    _whole_number(max_tokens, "max_tokens", 1, MAX_MAX_TOKENS)
    if template_version and template_version not in TEMPLATES:
        raise JobInputError("template", f"must be one of {', '.join(TEMPLATES)}, got {template_version!r}")
    template = TEMPLATES[template_version] if template_version else template_for(campaign.grader)
    chosen = choose_solutions(campaign, limit=limit, solution_ids=solution_ids)
    if not chosen:
        raise JobInputError("solutions", f"campaign {campaign.slug} has no regular solution with steps")
    job = LlmJudgeJob.objects.create(
        campaign=campaign, endpoint=endpoint, source=source_name(endpoint.model, template.version),
        template_version=template.version, max_tokens=max_tokens, solution_ids=chosen, solution_count=len(chosen),
        token_budget=endpoint.token_budget, started_by=account_of(user))
    jobs.dispatch_on_commit(job)
    return job


def resume_llm_judge_job(job: LlmJudgeJob, *, user: Actor) -> LlmJudgeJob:
    """Queue a stopped job again for the solutions it has not judged, with the endpoint's budget once more."""
    require(can_start_machine_labeling, user, job.campaign,
            f"only staff and admins of campaign {job.campaign.slug} start machine labeling jobs")
    if not job.resumable or job.status not in (JobStatus.FAILED, JobStatus.CANCELLED):
        raise JobInputError("job", f"job {job.pk} is {job.status} and has nothing left to resume")
    budget = job.tokens_used + (job.endpoint.token_budget if job.endpoint else job.token_budget)
    resumed = LlmJudgeJob.objects.filter(pk=job.pk, resumable=True, status=job.status).update(
        status=JobStatus.QUEUED, resumable=False, cancel_requested=False, error="", finished_at=None,
        dispatched_at=None, heartbeat_at=None, token_budget=budget)
    if not resumed:
        raise JobInputError("job", f"job {job.pk} was resumed already")
    job.refresh_from_db()
    jobs.dispatch_on_commit(job)
    return job


def pending_solutions(job: LlmJudgeJob) -> list[int]:
    """The job's solutions not judged yet: no label of its source, not listed unparsable."""
    labeled = set(MachineLabel.objects.filter(solution_id__in=job.solution_ids, kind=LLM.name, source=job.source)
                  .values_list("solution_id", flat=True).distinct())
    unreadable = {int(item["solution_id"]) for item in job.unparsable}
    return [pk for pk in job.solution_ids if pk not in labeled and pk not in unreadable]


def _solutions(ids: list[int]) -> Iterator[tuple[int, str, list[str]]]:
    """(id, problem, step texts) in the given order, read a chunk at a time."""
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start:start + CHUNK]
        problems = dict(Solution.objects.filter(pk__in=chunk).values_list("pk", "problem__text"))
        steps: dict[int, list[str]] = {pk: [] for pk in chunk}
        rows = (Completion.objects.filter(step__solution_id__in=chunk, index=0)
                .order_by("step__solution_id", "step__index").values_list("step__solution_id", "text"))
        for solution_id, text in rows:
            steps[solution_id].append(text)
        for pk in chunk:
            if pk in problems:  # a solution deleted since the job started is skipped
                yield pk, problems[pk], steps[pk]


def _record(job: LlmJudgeJob, solution_id: int, verdict: Verdict, step_count: int) -> None:
    values = [StepValue(index, value, 0, verdict.reasons.get(index))
              for index, value in step_values(verdict, step_count)]
    record_machine_labels(labels={solution_id: values}, kind=LLM.name, source=job.source, provenance={
        "job": job.pk, "model": job.source.rsplit("@", 1)[0], "template": job.template_version,
        "first_error": verdict.first_error, "parsed_by": verdict.parsed_by})


def _stop(job: LlmJudgeJob, status: str, why: str) -> str:
    left = len(pending_solutions(job))
    runner_error = f"{why}; {job.solutions_done} of {job.solution_count} solutions judged and saved"
    resumable = left > 0
    if resumable:
        runner_error += f", {left} left: resume the job to judge them"
    jobs.finish(job, status, error=runner_error, resumable=resumable)
    return status


def _judge(job: LlmJudgeJob, client: ChatClient, template: JudgeTemplate, scale: str,
           solution: tuple[int, str, list[str]]) -> ChatCompletion:
    solution_id, problem, steps = solution
    assert job.endpoint is not None
    with concurrency.slot(job.endpoint, wait_s=runner.heartbeat_timeout().total_seconds() / 2):
        answer = client.chat(template.render(problem=problem, steps=steps, scale=scale), max_tokens=job.max_tokens,
                             json_mode=True, seed=0)
    result = parse_verdict(answer.texts[0] if answer.texts else "", len(steps))
    if isinstance(result, Verdict):
        _record(job, solution_id, result, len(steps))
    else:
        job.unparsable = [*job.unparsable, {"solution_id": solution_id, "why": result.why}]
    return answer


def run_llm_judge_job(job_id: int) -> str | None:
    """The job's Celery task: judge its pending solutions one by one until done or stopped."""
    job = jobs.claim(LlmJudgeJob, job_id, where={"cancel_requested": False}, related=("campaign", "endpoint"),
                     heartbeat_at=timezone.now(), attempts=F("attempts") + 1)
    if job is None:
        return None
    if job.endpoint is None:
        jobs.finish(job, JobStatus.FAILED, error="its endpoint was deleted")
        return job.status
    client = ChatClient(served_model_for(job.endpoint))
    template = TEMPLATES[job.template_version]
    scale = describe_scale([(value.label, value.is_error) for value in campaign_scale(job.campaign).values])
    refused: list[dict[str, int | str]] = []  # refused since the last solution served
    for solution in _solutions(pending_solutions(job)):
        if LlmJudgeJob.objects.filter(pk=job.pk, cancel_requested=True).exists():
            return _stop(job, JobStatus.CANCELLED, "cancelled on request")
        if job.tokens_used >= job.token_budget:
            return _stop(job, JobStatus.FAILED, f"token budget spent ({job.tokens_used:,} of {job.token_budget:,})")
        try:
            answer = _judge(job, client, template, scale, solution)
        except ServedRejected as error:
            # one prompt too long for the server's context is that solution's; several in a row are the endpoint's
            refused.append({"solution_id": solution[0], "why": f"{error} A prompt longer than the server's context "
                                                               f"is the usual cause."})
            if len(refused) >= REFUSED_IN_A_ROW:
                return _stop(job, JobStatus.FAILED, f"the endpoint refused {len(refused)} solutions in a row: {error}")
            continue
        except ServedUnavailable as error:
            return _stop(job, JobStatus.FAILED, f"the endpoint went away: {error}")
        except ServedError as error:
            return _stop(job, JobStatus.FAILED, f"the endpoint refused: {error}")
        _count(job, refused, answer)
        refused = []
    if refused:
        _count(job, refused, None)
    jobs.finish(job, JobStatus.SUCCEEDED, progress=1.0, resumable=False)
    return job.status


def _count(job: LlmJudgeJob, refused: list[dict[str, int | str]], answer: ChatCompletion | None) -> None:
    """Saves the progress of a judged solution (``answer``; None: none) and of the solutions the server refused
    before it, listed among the unjudged."""
    job.unparsable = [*job.unparsable, *refused]
    job.solutions_done += len(refused) + (answer is not None)
    if answer is not None:
        job.tokens_used += answer.prompt_tokens + answer.completion_tokens
        job.tokens_estimated = job.tokens_estimated or answer.usage_estimated
    job.progress = min(job.solutions_done / max(job.solution_count, 1), 0.99)
    LlmJudgeJob.objects.filter(pk=job.pk).update(
        solutions_done=job.solutions_done, tokens_used=job.tokens_used, tokens_estimated=job.tokens_estimated,
        progress=job.progress, unparsable=job.unparsable, heartbeat_at=timezone.now())


def reconcile_llm_judge_jobs() -> list[int]:
    """The reaper's part: a running job whose worker stopped sending heartbeats is stopped resumably (what it
    judged is saved); a queued one whose task never reached the broker is sent again."""
    cutoff = timezone.now() - runner.heartbeat_timeout()
    stopped = []
    for job in LlmJudgeJob.objects.filter(status=JobStatus.RUNNING, heartbeat_at__lt=cutoff):
        if jobs.finish(job, JobStatus.FAILED, resumable=True,
                       error=f"worker lost: no heartbeat since {job.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC; resume it"):
            stopped.append(job.pk)
    return stopped + jobs.dispatch_pending(LlmJudgeJob, older_than=timedelta(seconds=30))

