"""Machine labeling jobs: Monte-Carlo or PRM step labels for chosen solutions of a campaign.

``mc`` runs ``python -m rewards.sampling rollouts`` (K continuations sampled from each step prefix and graded
with the project's grader, or OmegaPRM's binary search for the first step whose prefix no longer reaches the
answer); ``prm`` runs ``python -m rewards.training score`` with a registered PRM. Both go through the launch
backends (a local subprocess on the CPU here; a model folder, vLLM, Slurm or Kubernetes on a GPU node); ``mc`` may
sample its continuations from a served endpoint instead, as a sampling job does (``services.sampling``). On
success the labels are recorded as one source beside the human ratings; rollout count, model and settings are
the source's provenance.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.db.models import Count, Q

from annotate.labelsources.mc import MC
from annotate.labelsources.prm import PRM
from annotate.models import Campaign, Completion, Solution
from annotate.permissions import Actor, account_of, can_start_machine_labeling, require
from annotate.services.machine_labels import StepValue, record_machine_labels
from endpoints.models import Endpoint
from rewards.evaluation.step_metrics import DEFAULT_THRESHOLD, centre_on_threshold
from rewards.sampling.config import SMOLLM2, parse_rollout_config
from steplab import jobs

from ..backends import Launch, count_lines, python_command, summary_line
from ..models import BackendKind, Kind, LabelingMethod, MachineLabelingJob, RewardModel
from . import runner
from .sampling import (
    CONFIG,
    ENDPOINT,
    endpoint_launch,
    resumed_work_dir,
    served_keys,
    tokens_so_far,
    watch_on_endpoint,
    write_job_file,
)
from .training import JobInputError, chosen_settings, new_work_dir

SOLUTIONS = "solutions.jsonl"
OUTPUT = "labels.jsonl"
DEFAULT_SOLUTIONS = 20
MAX_SOLUTIONS = 5000
#: Monte-Carlo keys a user may set; ``solutions`` and ``output`` are the job's own files
MC_KEYS = ("model", "backend", "device", "rollouts", "strategy", "temperature", "top_p", "max_new_tokens",
           "prompt_template", "use_chat_template", "seed", "max_steps")


def choose_solutions(campaign: Campaign, *, method: str, limit: int,
                     solution_ids: list[int] | None = None) -> list[Solution]:
    """Regular solutions (never gold or screening) in a stable order: the ones named, else those no labeler has
    had yet first. Monte-Carlo labels need a ground truth to grade continuations against."""
    solutions = Solution.objects.filter(campaign=campaign, is_quality_control=False, is_screening=False)
    if method == LabelingMethod.MC:
        solutions = solutions.filter(problem__answer__isnull=False)
    solutions = solutions.annotate(steps_n=Count("steps")).filter(steps_n__gt=0).select_related("problem")
    if solution_ids is not None:
        return list(solutions.filter(pk__in=solution_ids).order_by("pk")[:limit])
    return list(solutions.order_by("label_count", "pk")[:limit])


def _step_texts(solutions: list[Solution]) -> dict[int, list[str]]:
    """Each solution's own steps (completion 0 of every step position), in order."""
    texts: dict[int, list[str]] = {s.pk: [] for s in solutions}
    rows = (Completion.objects.filter(step__solution__in=solutions, index=0)
            .order_by("step__solution_id", "step__index").values_list("step__solution_id", "text"))
    for solution_id, text in rows.iterator(chunk_size=5000):
        texts[solution_id].append(text)
    return texts


def _input_rows(method: str, solutions: list[Solution]) -> list[dict[str, Any]]:
    texts = _step_texts(solutions)
    if method == LabelingMethod.MC:
        return [{"solution_id": s.pk, "problem": s.problem.text, "answer": s.problem.answer, "steps": texts[s.pk]}
                for s in solutions]
    return [{"id": s.pk, "prompt": s.problem.text, "completions": texts[s.pk]} for s in solutions]


def rollout_budget(config: Mapping[str, Any], solutions: list[Solution]) -> int:
    """The most continuations a Monte-Carlo job can sample: K per step prefix it may estimate (every step, or
    the first ``max_steps``; a binary search visits about log2 of them plus the full solution)."""
    rollouts, cap = int(config.get("rollouts", 4)), config.get("max_steps")
    prefixes = [min(int(getattr(s, "steps_n", 0)), cap or 10**9) for s in solutions]
    if config.get("strategy", "binary_search") == "binary_search":
        return rollouts * sum(math.ceil(math.log2(n + 1)) + 1 for n in prefixes)
    return rollouts * sum(prefixes)


def missing_reward_model(pk: object, campaign: Campaign) -> str:
    return f"no reward model {pk} in campaign {campaign.slug}"


def start_machine_labeling_job(*, campaign: Campaign, method: str, limit: int = DEFAULT_SOLUTIONS,
                               solution_ids: list[int] | None = None, reward_model: RewardModel | None = None,
                               config: Mapping[str, Any] | None = None, backend: str = BackendKind.LOCAL,
                               endpoint: Endpoint | None = None, user: Actor) -> MachineLabelingJob:
    """Validate, write the job's input and job file, queue it; ``endpoint``: Monte-Carlo continuations from that
    served model (one ``user`` may use). Errors name the input at fault (``JobInputError.field``); nothing is
    queued then."""
    require(can_start_machine_labeling, user, campaign,
            f"only staff and admins of campaign {campaign.slug} start machine labeling jobs")
    if method not in LabelingMethod.values:
        raise JobInputError("method", f"must be one of {', '.join(LabelingMethod.values)}, got {method!r}")
    if backend not in BackendKind.values:
        raise JobInputError("backend", f"must be one of {', '.join(BackendKind.values)}, got {backend!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_SOLUTIONS:
        raise JobInputError("solutions", f"must be a whole number from 1 to {MAX_SOLUTIONS}, got {limit!r}")
    keys = chosen_settings(config, MC_KEYS, "Monte-Carlo") if method == LabelingMethod.MC else {}
    if endpoint is not None and method != LabelingMethod.MC:
        raise JobInputError(ENDPOINT, "a served endpoint samples Monte-Carlo rollouts; a PRM scores in the job")
    if method == LabelingMethod.MC:
        keys = served_keys(keys, endpoint, user=user, campaign=campaign)
    if method == LabelingMethod.PRM:
        if reward_model is None or reward_model.kind != Kind.PRM:
            raise JobInputError("reward_model", "choose a registered PRM (an ORM scores no steps)")
        if reward_model.campaign_id not in (None, campaign.pk):  # word for word as for a model that does not exist
            raise JobInputError("reward_model", missing_reward_model(reward_model.pk, campaign))
    solutions = choose_solutions(campaign, method=method, limit=limit, solution_ids=solution_ids)
    if not solutions:
        need = " whose problem has a ground-truth answer" if method == LabelingMethod.MC else ""
        raise JobInputError("solutions", f"campaign {campaign.slug} has no regular solution with steps{need}")
    with new_work_dir(f"label-{campaign.pk}") as work:
        with (work / SOLUTIONS).open("w", encoding="utf-8") as handle:
            for row in _input_rows(method, solutions):
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        if method == LabelingMethod.MC:
            write_job_file(work, keys, {"solutions": SOLUTIONS, "output": OUTPUT}, parse_rollout_config)
        job = MachineLabelingJob.objects.create(
            campaign=campaign, method=method, reward_model=reward_model, backend=backend,
            config={**keys, **({ENDPOINT: endpoint.pk} if endpoint else {})},
            started_by=account_of(user), work_dir=str(work), solution_count=len(solutions),
            summary={"rollout_budget": rollout_budget(keys, solutions)} if method == LabelingMethod.MC else {})
    jobs.dispatch_on_commit(job)
    return job


def machine_labeling_launch(job: MachineLabelingJob) -> Launch:
    work = Path(job.work_dir)
    if job.method == LabelingMethod.MC:
        command = python_command("rewards.sampling", "rollouts", "--config", str(work / CONFIG))
    else:
        assert job.reward_model is not None  # a PRM job keeps its model (start refuses one without)
        command = python_command("rewards.training", "score", "--model", job.reward_model.location,
                                 "--input", str(work / SOLUTIONS), "--out", str(work / OUTPUT))
    return endpoint_launch(job, Launch(name=f"steplab-label-{job.pk}", work_dir=work, commands=[command],
                                       gpus=1 if job.backend != BackendKind.LOCAL else 0))


def resume_machine_labeling_job(job: MachineLabelingJob, *, user: Actor) -> MachineLabelingJob:
    """Continue a Monte-Carlo job that stopped: its labeled solutions kept, the rest labeled."""
    require(can_start_machine_labeling, user, job.campaign,
            f"only staff and admins of campaign {job.campaign.slug} start machine labeling jobs")
    if job.method != LabelingMethod.MC:
        raise JobInputError("job", f"{job} scores with a PRM: start it again instead")
    with resumed_work_dir(job, output=OUTPUT, inputs=(SOLUTIONS,)) as work:
        resumed = MachineLabelingJob.objects.create(
            campaign=job.campaign, method=job.method, config=job.config, backend=job.backend,
            started_by=account_of(user), work_dir=str(work), solution_count=job.solution_count,
            summary={"rollout_budget": job.summary.get("rollout_budget"), "resumed_from": job.pk})
    jobs.dispatch_on_commit(resumed)
    return resumed


def _progress(job: MachineLabelingJob) -> dict[str, Any]:
    """Solutions labeled so far: the rollouts program writes ``labels.jsonl.partial`` solution by solution, the
    scorer ``labels.jsonl`` row by row; on an endpoint, the completion tokens they spent."""
    work = Path(job.work_dir)
    done = count_lines(work / (OUTPUT + ".partial")) or count_lines(work / OUTPUT)
    tokens = tokens_so_far(work / (OUTPUT + ".partial")) if ENDPOINT in job.config else {}
    return {"progress": min(done / max(job.solution_count, 1), 0.99),
            "summary": {**job.summary, "solutions_done": done, "solutions_total": job.solution_count, **tokens}}


def mc_values(row: Mapping[str, Any], step_count: int) -> list[StepValue]:
    """One solution's rollout result as step labels. Estimated steps keep their estimate and rollout count; a
    binary search leaves steps unvisited, and those before its first error (every step when it found none) are
    correct by the search's own assumption (a prefix that reaches the answer has correct steps): value 1 with
    0 rollouts, as an imported first-error index gives them. Steps after the first error stay unlabeled."""
    estimated = {int(step["index"]): StepValue(int(step["index"]), float(step["value"]), int(step["rollouts"]))
                 for step in row["steps"]}
    first_error = row.get("first_error")
    end = step_count if first_error is None else int(first_error)
    for index in range(end):
        estimated.setdefault(index, StepValue(index, 1.0, 0))
    return [estimated[index] for index in sorted(estimated) if index < step_count]


def record_labels(job: MachineLabelingJob) -> None:
    """The job's output becomes the source ``mc:<model>`` or ``prm:<model name>``; a bad file fails the job."""
    work = Path(job.work_dir)
    output = work / OUTPUT
    summary = summary_line(work) if job.method == LabelingMethod.MC else {}
    if not output.is_file() or output.stat().st_size == 0:
        raise ValueError(f"the job wrote no labels (summary: {summary})")
    step_counts = dict(Solution.objects.filter(_given_solutions(job)).annotate(n=Count("steps"))
                       .values_list("pk", "n"))
    labels: dict[int, list[StepValue]] = {}
    with output.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if job.method == LabelingMethod.MC:
                solution_id = int(row["solution_id"])
                labels[solution_id] = mc_values(row, step_counts.get(solution_id, 0))
            else:
                solution_id = int(row["id"])
                # the PRM's calibrated first-error threshold (the scorer writes it) becomes the 0.5 at which a
                # machine label says "correct"
                threshold = float(row.get("threshold", DEFAULT_THRESHOLD))
                labels[solution_id] = [StepValue(i, centre_on_threshold(v, threshold))
                                       for i, v in enumerate(row.get("step_scores") or [])]
    if job.method == LabelingMethod.MC:
        kind, source = MC.name, str(job.config.get("model", SMOLLM2))
        provenance = {"job": job.pk, "rollouts": job.config.get("rollouts", 4),
                      "strategy": job.config.get("strategy", "binary_search"),
                      "settings": summary.get("settings", job.config)}
    else:
        assert job.reward_model is not None
        kind, source = PRM.name, job.reward_model.name
        provenance = {"job": job.pk, "reward_model": job.reward_model.pk, "location": job.reward_model.location,
                      "threshold": (job.reward_model.metrics.get("validation") or {}).get("threshold"),
                      "values": "PRM P(correct) centred on its calibrated threshold (threshold → 0.5)"}
    recorded = record_machine_labels(labels=labels, kind=kind, source=source, provenance=provenance)
    summary = {**job.summary, **summary, "solutions_done": len(labels), "solutions_total": job.solution_count,
               "source": f"{kind}:{source}"}
    job.summary, job.labels_recorded = summary, recorded
    MachineLabelingJob.objects.filter(pk=job.pk).update(summary=summary, labels_recorded=recorded)


def _given_solutions(job: MachineLabelingJob) -> Q:
    """The solutions the job was given (its input file's ids)."""
    ids = []
    with (Path(job.work_dir) / SOLUTIONS).open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            ids.append(int(row.get("solution_id", row.get("id"))))
    return Q(pk__in=ids, campaign=job.campaign)


def machine_labeling_hooks(job: MachineLabelingJob) -> runner.JobHooks:
    return runner.JobHooks(launch=machine_labeling_launch(job), progress=lambda: _progress(job),
                           on_success=lambda: record_labels(job))


def run_machine_labeling_job(job_id: int) -> str | None:
    job = runner.claim(MachineLabelingJob, job_id, related=("campaign", "reward_model", "started_by"))
    return None if job is None else watch_on_endpoint(job, machine_labeling_hooks(job))
