"""Sampling jobs and Monte-Carlo labeling from a served policy, against a real llama.cpp server (``served_server``,
``keyed_server``) through a real proxy that injects faults and counts what it relayed (``fault_proxy``).

Each job runs for real: its watcher here (``run_*_job``), its sampler a subprocess started by the local backend,
which reaches the server with the endpoint from its environment. Small fixed sizes and short ``max_tokens`` keep
the file fast; what the model writes is not asserted, only what the platform does with it.
"""
from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from annotate.models import MachineLabel
from annotate.permissions import SYSTEM
from endpoints.models import Endpoint
from endpoints.services import register_endpoint
from rewards.jobs.backends import KubernetesBackend, SlurmBackend, _group_runs
from rewards.jobs.models import Candidate, JobStatus, MachineLabelingJob, SamplingJob
from rewards.jobs.services import machine_labeling, runner, sampling
from rewards.jobs.services.training import JobInputError, request_cancel
from tests.factories import ProblemFactory, SolutionFactory, solution_with_steps
from tests.served.conftest import FaultProxy, ServedServer
from tests.served.leaks import places_holding

pytestmark = pytest.mark.django_db
MAX_TOKENS = 24


@pytest.fixture
def jobs_root(settings, tmp_path: Path) -> Path:
    settings.STEPLAB_JOBS_ROOT = tmp_path / "jobs"
    settings.STEPLAB_JOB_POLL_INTERVAL_S = 0.2
    return settings.STEPLAB_JOBS_ROOT


@pytest.fixture
def endpoint_at(settings) -> Callable[..., Endpoint]:
    settings.STEPLAB_ENDPOINT_ALLOW = ["127.0.0.1"]

    def make(base_url: str, model: str, *, api_key: str = "", token_budget: int = 200_000) -> Endpoint:
        return register_endpoint(SYSTEM, campaign=None, name=f"policy-{Endpoint.objects.count()}", base_url=base_url,
                                 model=model, api_key=api_key, max_concurrency=2, timeout_s=60.0,
                                 token_budget=token_budget)

    return make


def _campaign_with_problems(campaign_factory: Any, count: int) -> Any:
    campaign = campaign_factory()
    for i in range(count):
        SolutionFactory(campaign=campaign, problem=ProblemFactory(text=f"Problem {i}: what is {i} + 10?",
                                                                  answer=str(i + 10)))
    return campaign


def _watch_with(job: Any, run: Callable[[int], str | None], hooks: Callable[[Any], Any],
                on_progress: Callable[[dict[str, Any]], None]) -> str | None:
    """Run the job's task body with ``on_progress`` told each progress reading of its watcher (what a test does
    mid-job: cancel it, inject a fault)."""
    def hooked(current: Any) -> Any:
        made = hooks(current)
        read = made.progress

        def progress() -> dict[str, Any]:
            reading = read()
            on_progress(reading["summary"])
            return reading

        made.progress = progress
        return made

    name = hooks.__name__
    module = sampling if name == "sampling_hooks" else machine_labeling
    original = getattr(module, name)
    setattr(module, name, hooked)
    try:
        return run(job.pk)
    finally:
        setattr(module, name, original)


def test_samples_from_a_keyed_server_become_the_pool_and_the_key_stays_out_of_every_file(
        campaign_factory, endpoint_at, jobs_root: Path, keyed_server: ServedServer, served_api_key: str) -> None:
    campaign = _campaign_with_problems(campaign_factory, 2)
    endpoint = endpoint_at(keyed_server.base_url, keyed_server.model, api_key=served_api_key)
    job = sampling.start_sampling_job(campaign, config={"n": 2, "max_new_tokens": MAX_TOKENS}, endpoint=endpoint,
                                      user=SYSTEM)
    assert job.config["backend"] == "served" and job.config["model"] == keyed_server.model
    assert sampling.run_sampling_job(job.pk) == JobStatus.SUCCEEDED, SamplingJob.objects.get(pk=job.pk).error
    job.refresh_from_db()
    candidates = list(Candidate.objects.filter(pool_problem__pool=job.pool))
    written = job.summary["written"]
    assert job.summary["samples"] == 4 and len(candidates) == written
    assert job.summary["tokens_spent"] > 0 and job.summary["completion_tokens"] > 0
    assert all(c.provenance["sampling"]["backend"] == "served" and c.provenance["sampling"]["model"]
               == keyed_server.model for c in candidates)
    job_file = json.loads((Path(job.work_dir) / "job.json").read_text())
    assert job_file["token_budget"] == endpoint.token_budget and "endpoint" not in job_file

    # the manifests and scripts the cluster backends write for the same launch hold no key either: it goes to
    # sbatch's environment and to a Secret applied on kubectl's stdin
    calls: list[tuple[list[str], dict[str, Any]]] = []

    def recorder(argv: list[str], **secret: Any) -> subprocess.CompletedProcess[str]:
        calls.append((list(argv), secret))
        return subprocess.CompletedProcess(argv, 0, "42\n", "")

    launch = sampling.sampling_launch(job)
    assert served_api_key not in repr(launch)
    SlurmBackend(runner=recorder, options={}).submit(launch)
    assert calls[-1][1]["env"]["STEPLAB_ENDPOINT_KEY"] == served_api_key
    KubernetesBackend(runner=recorder).submit(launch)
    secret_apply, job_apply = calls[-2], calls[-1]
    assert secret_apply[0] == ["kubectl", "apply", "-f", "-"] and served_api_key in secret_apply[1]["input"]
    manifest = json.loads((Path(job.work_dir) / "job.k8s.json").read_text())
    assert manifest["spec"]["template"]["spec"]["containers"][0]["envFrom"] == [
        {"secretRef": {"name": f"steplab-sample-{job.pk}-secrets"}}]
    assert job_apply[1] == {}
    assert places_holding(served_api_key, texts={"error": job.error, "log": job.log_tail},
                          folders=[jobs_root]) == []


def test_monte_carlo_rollouts_from_the_served_policy_become_machine_labels(
        campaign_factory, endpoint_at, jobs_root: Path, fault_proxy: FaultProxy,
        served_server: ServedServer) -> None:
    campaign = campaign_factory()
    solution = solution_with_steps(campaign, ["We add: $2 + 2 = 4$.", "So the sum is 4.", "# Answer\n\n4"],
                                   problem_text="What is $2 + 2$?", answer="4")
    endpoint = endpoint_at(fault_proxy.base_url, served_server.model)
    job = machine_labeling.start_machine_labeling_job(
        campaign=campaign, method="mc", endpoint=endpoint, user=SYSTEM,
        config={"rollouts": 2, "max_new_tokens": MAX_TOKENS, "strategy": "every_step"})
    assert machine_labeling.run_machine_labeling_job(job.pk) == JobStatus.SUCCEEDED, \
        MachineLabelingJob.objects.get(pk=job.pk).error
    job.refresh_from_db()
    labels = {label.step.index: label for label in MachineLabel.objects.filter(solution=solution)
              .select_related("step")}
    assert set(labels) == {0, 1, 2}
    assert all(label.kind == "mc" and label.source == served_server.model for label in labels.values())
    assert [labels[i].rollouts for i in (0, 1)] == [2, 2] and (labels[2].value, labels[2].rollouts) == (1.0, 0)
    assert job.summary["source"] == f"mc:{served_server.model}" and job.summary["rollouts_used"] == 4
    # two prefixes, two continuations each; the proxy saw every request, each carrying its prefix
    assert fault_proxy.completed_matching("We add: $2 + 2 = 4$.") >= 2
    assert fault_proxy.completed_matching("So the sum is 4.") >= 1


def test_a_429_with_retry_after_mid_job_is_waited_out(campaign_factory, endpoint_at, jobs_root: Path,
                                                      fault_proxy: FaultProxy, served_server: ServedServer) -> None:
    campaign = _campaign_with_problems(campaign_factory, 3)
    endpoint = endpoint_at(fault_proxy.base_url, served_server.model)
    job = sampling.start_sampling_job(campaign, config={"n": 1, "max_new_tokens": MAX_TOKENS}, endpoint=endpoint,
                                      user=SYSTEM)
    injected: list[int] = []

    def once_started(summary: dict[str, Any]) -> None:
        if summary["samples_done"] >= 1 and not injected:
            fault_proxy.inject("429", 1, retry_after="1")
            injected.append(fault_proxy.connections)

    status = _watch_with(job, sampling.run_sampling_job, sampling.sampling_hooks, once_started)
    job.refresh_from_db()
    assert status == JobStatus.SUCCEEDED, job.error
    assert injected and injected[0] < 3, "the fault came while problems were left"
    assert fault_proxy.completed == 3 and fault_proxy.connections == 4  # the 429, then its retry
    assert job.summary["samples"] == 3


def test_a_cancelled_job_stops_its_sampler_and_a_resumed_one_samples_only_the_rest(
        campaign_factory, endpoint_at, jobs_root: Path, fault_proxy: FaultProxy,
        served_server: ServedServer) -> None:
    campaign = _campaign_with_problems(campaign_factory, 4)
    endpoint = endpoint_at(fault_proxy.base_url, served_server.model)
    job = sampling.start_sampling_job(campaign, config={"n": 1, "max_new_tokens": MAX_TOKENS}, endpoint=endpoint,
                                      user=SYSTEM)

    def cancel_after_one(summary: dict[str, Any]) -> None:
        if summary["samples_done"] >= 1:
            request_cancel(SamplingJob.objects.get(pk=job.pk))

    assert _watch_with(job, sampling.run_sampling_job, sampling.sampling_hooks, cancel_after_one) \
        == JobStatus.CANCELLED
    job.refresh_from_db()
    assert not _group_runs(int(job.external_id), Path(job.work_dir) / "run.sh"), "the sampler still runs"
    kept = [json.loads(line) for line in (Path(job.work_dir) / "samples.jsonl.partial").read_text().splitlines()]
    assert 1 <= len(kept) < 4 and job.pool is None
    sent_before = fault_proxy.completed

    with pytest.raises(JobInputError, match="nothing to resume"):
        sampling.resume_sampling_job(SamplingJob.objects.create(campaign=campaign, work_dir=job.work_dir,
                                                                status=JobStatus.SUCCEEDED), user=SYSTEM)
    resumed = sampling.resume_sampling_job(job, user=SYSTEM)
    assert resumed.summary == {"resumed_from": job.pk} and resumed.config == job.config
    assert sampling.run_sampling_job(resumed.pk) == JobStatus.SUCCEEDED, SamplingJob.objects.get(pk=resumed.pk).error
    resumed.refresh_from_db()
    assert resumed.summary["resumed_problems"] == len(kept) and resumed.summary["samples"] == 4 - len(kept)
    assert fault_proxy.completed - sent_before == 4 - len(kept)
    for row in kept:  # a problem sampled before the cancel is not asked for again
        assert fault_proxy.completed_matching(row["problem"]) == 1
    assert Candidate.objects.filter(pool_problem__pool=resumed.pool).count() == resumed.summary["written"]


def test_sample_candidates_samples_from_an_endpoint_named_by_id_or_name(
        campaign_factory, endpoint_at, jobs_root: Path, tmp_path: Path, fault_proxy: FaultProxy,
        served_server: ServedServer) -> None:
    campaign = _campaign_with_problems(campaign_factory, 2)
    staff_wide = endpoint_at(fault_proxy.base_url, served_server.model)
    ours = register_endpoint(SYSTEM, campaign=campaign, name="our llama", base_url=fault_proxy.base_url,
                             model=served_server.model)
    theirs = register_endpoint(SYSTEM, campaign=campaign_factory("c2"), name="their llama",
                               base_url=fault_proxy.base_url, model=served_server.model)
    config = tmp_path / "sampling.json"
    config.write_text(json.dumps({"n": 1, "max_new_tokens": MAX_TOKENS}))

    def sample(endpoint: str, *extra: str) -> str:
        out = StringIO()
        call_command("sample_candidates", "--campaign", campaign.slug, "--config", str(config), "--endpoint", endpoint,
                     *extra, stdout=out)
        return out.getvalue()

    assert f"from endpoint {ours.pk} ({served_server.model})" in sample("our llama")
    job = SamplingJob.objects.get(campaign=campaign)
    assert job.config["endpoint"] == ours.pk and job.config["backend"] == "served"
    assert sampling.run_sampling_job(job.pk) == JobStatus.SUCCEEDED, SamplingJob.objects.get(pk=job.pk).error
    assert fault_proxy.completed_matching("what is") == 2 and SamplingJob.objects.get(pk=job.pk).pool is not None
    sample(str(staff_wide.pk))
    assert SamplingJob.objects.filter(campaign=campaign).latest("pk").config["endpoint"] == staff_wide.pk

    with pytest.raises(CommandError, match="--endpoint: no endpoint with id 987654321"):
        sample("987654321")
    with pytest.raises(CommandError, match=f"endpoint {theirs.pk} \\('their llama'\\) belongs to campaign "
                                           f"{theirs.campaign.slug}; a job of campaign {campaign.slug} may use"):
        sample(str(theirs.pk))
    with pytest.raises(CommandError, match="no endpoint named 'their llama' in campaign"):
        sample("their llama")
    with pytest.raises(CommandError, match="model: is set by the endpoint"):
        config.write_text(json.dumps({"n": 1, "model": "SmolLM2"}))
        sample("our llama")
    assert SamplingJob.objects.filter(campaign=campaign).count() == 2


class WatcherLost(RuntimeError):
    """Raised in a watcher to stand for its death (a killed worker): it sends no heartbeat after it."""


def test_a_job_the_reaper_retries_has_only_what_is_left_of_its_token_budget(
        campaign_factory, endpoint_at, jobs_root: Path, fault_proxy: FaultProxy, served_server: ServedServer,
        settings) -> None:
    settings.STEPLAB_JOB_MAX_ATTEMPTS = 2
    campaign = _campaign_with_problems(campaign_factory, 3)
    # a budget of 1 token lets one request start, never a second
    endpoint = endpoint_at(fault_proxy.base_url, served_server.model, token_budget=1)
    job = sampling.start_sampling_job(campaign, config={"n": 1, "max_new_tokens": MAX_TOKENS}, endpoint=endpoint,
                                      user=SYSTEM)
    ledger = Path(job.work_dir) / "samples.jsonl.tokens"

    def lose_the_watcher_once_tokens_are_spent(summary: dict[str, Any]) -> None:
        if ledger.is_file():
            raise WatcherLost

    with pytest.raises(WatcherLost):
        _watch_with(job, sampling.run_sampling_job, sampling.sampling_hooks, lose_the_watcher_once_tokens_are_spent)
    spent = int(ledger.read_text())
    assert spent > 1 and fault_proxy.completed_matching("what is") == 1

    later = timezone.now() + runner.heartbeat_timeout() + timedelta(seconds=1)
    assert runner.reap(SamplingJob, sampling.sampling_hooks, now=later) == [job.pk]
    assert SamplingJob.objects.get(pk=job.pk).status == JobStatus.QUEUED
    assert sampling.run_sampling_job(job.pk) == JobStatus.FAILED
    job.refresh_from_db()
    # the retry counted on from the tokens spent: a fresh budget would have let it send one more request
    assert job.attempts == 2 and "token budget spent" in job.error
    assert fault_proxy.completed_matching("what is") == 1 and int(ledger.read_text()) == spent

    resumed = sampling.resume_sampling_job(job, user=SYSTEM)  # stopped, resumable: a resume has a budget of its own
    assert sampling.run_sampling_job(resumed.pk) == JobStatus.FAILED
    assert fault_proxy.completed_matching("what is") == 2


def test_a_labeling_round_chooses_from_candidates_sampled_from_the_served_policy(
        campaign_factory, endpoint_at, jobs_root: Path, fault_proxy: FaultProxy,
        served_server: ServedServer) -> None:
    from annotate.models import Solution
    from rewards.jobs.models import LabelingRound
    from rewards.jobs.services.labeling_rounds import reconcile, sample_for_labeling_round, sampling_finished

    campaign = _campaign_with_problems(campaign_factory, 2)
    endpoint = endpoint_at(fault_proxy.base_url, served_server.model)
    with pytest.raises(JobInputError) as refused:
        sample_for_labeling_round(campaign, endpoint=endpoint, strategy="uncertain", batch_size=2, user=SYSTEM)
    assert refused.value.field == "reward_model"  # a strategy that needs scores, and no PRM: nothing is sampled
    job = sample_for_labeling_round(campaign, endpoint=endpoint, strategy="random", batch_size=2,
                                    config={"seed": 1}, sampling={"n": 2, "max_new_tokens": MAX_TOKENS}, user=SYSTEM)
    assert job.config["labeling_round"]["strategy"] == "random"
    assert "labeling_round" not in json.loads((Path(job.work_dir) / "job.json").read_text())
    assert sampling.run_sampling_job(job.pk) == JobStatus.SUCCEEDED, SamplingJob.objects.get(pk=job.pk).error
    started = reconcile()  # the kind's follow-up did not run (a lost watcher): the periodic reconciler starts it
    job.refresh_from_db()
    labeling_round = LabelingRound.objects.get(pk=job.summary["labeling_round"])
    assert started == [labeling_round.pk]
    assert labeling_round.pool == job.pool and labeling_round.status == LabelingRound.Status.COMPLETED
    chosen = Solution.objects.filter(campaign=campaign, generation=labeling_round.number)
    assert chosen.count() == min(2, job.summary["written"])
    assert all(s.provenance["sampled"]["sampling"]["model"] == served_server.model for s in chosen)
    assert sampling_finished(job.pk) is None and reconcile() == []  # once
