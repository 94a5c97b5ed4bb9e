"""The LLM-judge job against a real llama.cpp server (``served_server``), through a real proxy that counts what it
relayed (``fault_proxy``): labels and agreement figures end to end, a server stopped mid-job and the job resumed
with nothing lost and no solution judged twice, an unparsable answer, a spent token budget."""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.utils import timezone

from annotate.models import MachineLabel, Solution
from annotate.permissions import SYSTEM
from annotate.services.agreement import load_labelings, machine_agreement
from endpoints.models import Endpoint
from endpoints.services import register_endpoint
from rewards.jobs.models import JobStatus, LlmJudgeJob
from rewards.jobs.services import runner
from rewards.jobs.services.llm_judge import (
    reconcile_llm_judge_jobs,
    resume_llm_judge_job,
    run_llm_judge_job,
    start_llm_judge_job,
)
from rewards.jobs.services.training import JobInputError
from rewards.served import judge
from tests.factories import finished_labeling, numbered_solution
from tests.served.conftest import FaultProxy, ServedServer

pytestmark = pytest.mark.django_db
#: short answers keep the suite fast; the judge's verdict fits in them
MAX_TOKENS = 24


#: a short prompt for the tests that count requests rather than read verdicts: a tenth of the default's tokens
SHORT = judge.JudgeTemplate(version="test-short-v1", system="Grade the steps.",
                            user="{problem}\n{steps}\nJSON first_error (-1: none)?")


@pytest.fixture
def short_template(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(judge.TEMPLATES, SHORT.version, SHORT)
    return SHORT.version


@pytest.fixture
def endpoint_at(settings, campaign_factory):  # type: ignore[no-untyped-def]
    settings.STEPLAB_ENDPOINT_ALLOW = ["127.0.0.1"]

    def make(base_url: str, model: str, *, token_budget: int = 200_000) -> Endpoint:
        return register_endpoint(SYSTEM, campaign=None, name=f"judge-{Endpoint.objects.count()}", base_url=base_url,
                                 model=model, max_concurrency=2, timeout_s=30.0, token_budget=token_budget)

    return make


def marker(solution: Solution) -> str:
    """Text only this solution's request carries (its first step, "Step 1 of solution <pk>.")."""
    return f"of solution {solution.pk}."


def judged(job: LlmJudgeJob) -> dict[int, str]:
    """solution id -> "labeled" or "unparsable", for the job's solutions judged so far."""
    labeled = set(MachineLabel.objects.filter(kind="llm", source=job.source).values_list("solution_id", flat=True))
    result = {pk: "labeled" for pk in labeled}
    for item in job.unparsable:
        assert item["solution_id"] not in result, "a solution both labeled and unparsable"
        result[item["solution_id"]] = "unparsable"
    return result


def test_a_judge_job_writes_labels_and_agreement_figures(campaign_factory, member, endpoint_at,
                                                         fault_proxy: FaultProxy,
                                                         served_server: ServedServer) -> None:
    campaign = campaign_factory()
    # small: each solution is one request on the full prompt; the restart test below judges a hundred
    solutions = [numbered_solution(campaign, 3) for _ in range(6)]
    ann = member(campaign, "ann")
    for solution in solutions[:3]:
        finished_labeling(solution, ann, [1, 1, 1])
    endpoint = endpoint_at(fault_proxy.base_url, served_server.model)
    job = start_llm_judge_job(campaign=campaign, endpoint=endpoint, user=SYSTEM, limit=6, max_tokens=MAX_TOKENS)
    assert job.source == f"{served_server.model}@processbench-v1"
    assert run_llm_judge_job(job.pk) == JobStatus.SUCCEEDED
    job.refresh_from_db()
    outcome = judged(job)
    assert sorted(outcome) == sorted(s.pk for s in solutions)
    assert job.solutions_done == 6 and job.progress == 1.0 and not job.resumable
    assert job.tokens_used > 0 and job.progress_words().startswith("6 of 6 solutions")
    assert fault_proxy.completed == 6
    for label in MachineLabel.objects.filter(kind="llm", source=job.source).select_related("step"):
        first = label.provenance["first_error"]
        assert label.value == (0.0 if label.step.index == first else 1.0)
        assert first < 0 or label.step.index <= first  # steps after the judged first error stay unlabeled
        assert label.provenance["template"] == "processbench-v1" and label.provenance["job"] == job.pk
    figures = machine_agreement(load_labelings(campaign).labelings, campaign)
    key = f"llm:{job.source}"
    labeled_with_humans = [s for s in solutions[:3] if outcome[s.pk] == "labeled"]
    if labeled_with_humans:
        assert figures[key]["first_error_agreement"]["items"] == len(labeled_with_humans)
    assert figures.get(key, {}).get("solutions", 0) == sum(v == "labeled" for v in outcome.values())


def test_a_server_stopped_mid_job_loses_nothing_and_judges_no_solution_twice(
        campaign_factory, endpoint_at, short_template: str, fault_proxy: FaultProxy,
        served_server: ServedServer) -> None:
    campaign = campaign_factory()
    # one step each and one token per answer: the test counts requests, not verdicts (a one-token answer is listed
    # unparsable), and the server's time is the prompt it reads
    solutions = [numbered_solution(campaign, 1) for _ in range(100)]
    endpoint = endpoint_at(fault_proxy.base_url, served_server.model)
    job = start_llm_judge_job(campaign=campaign, endpoint=endpoint, user=SYSTEM, limit=100, max_tokens=1,
                              template_version=short_template)

    def stop_at(count: int) -> None:
        while fault_proxy.completed < count:
            time.sleep(0.01)
        served_server.stop()

    stopper = threading.Thread(target=stop_at, args=(40,))
    stopper.start()
    try:
        assert run_llm_judge_job(job.pk) == JobStatus.FAILED
    finally:
        stopper.join()
        served_server.start()
    job.refresh_from_db()
    first_run = judged(job)
    assert job.resumable and "went away" in job.error and "resume" in job.error
    assert 40 <= len(first_run) < 100 and job.solutions_done == len(first_run)
    resume_llm_judge_job(job, user=SYSTEM)
    assert run_llm_judge_job(job.pk) == JobStatus.SUCCEEDED
    job.refresh_from_db()
    assert sorted(judged(job)) == sorted(s.pk for s in solutions)
    assert job.solutions_done == 100
    counts = {s.pk: fault_proxy.completed_matching(marker(s)) for s in solutions}
    assert set(counts.values()) == {1}, {pk: n for pk, n in counts.items() if n != 1}


def test_an_unparsable_answer_is_recorded_not_guessed(campaign_factory, endpoint_at, short_template: str,
                                                      fault_proxy: FaultProxy, served_server: ServedServer) -> None:
    campaign = campaign_factory()
    solution = numbered_solution(campaign, 3)
    endpoint = endpoint_at(fault_proxy.base_url, served_server.model)
    # one token cannot hold a verdict: whatever the model starts with is unreadable
    job = start_llm_judge_job(campaign=campaign, endpoint=endpoint, user=SYSTEM, limit=1, max_tokens=1,
                              template_version=short_template)
    assert run_llm_judge_job(job.pk) == JobStatus.SUCCEEDED
    job.refresh_from_db()
    assert [item["solution_id"] for item in job.unparsable] == [solution.pk]
    assert job.unparsable[0]["why"]
    assert not MachineLabel.objects.filter(solution=solution).exists()


def too_long(solution: Solution) -> Solution:
    """The solution with a first step longer than the server's context (a real HTTP 400 from llama.cpp)."""
    from annotate.models import Completion

    Completion.objects.filter(step__solution=solution, step__index=0).update(
        text=f"Step 1 of solution {solution.pk}. " + "seven plus eight is fifteen; " * 600)
    return solution


def test_a_solution_the_server_refuses_is_listed_and_the_job_goes_on(campaign_factory, endpoint_at,
                                                                      short_template: str, fault_proxy: FaultProxy,
                                                                      served_server: ServedServer) -> None:
    campaign = campaign_factory()
    first, long, last = numbered_solution(campaign, 2), too_long(numbered_solution(campaign, 2)), numbered_solution(
        campaign, 2)
    endpoint = endpoint_at(fault_proxy.base_url, served_server.model)
    job = start_llm_judge_job(campaign=campaign, endpoint=endpoint, user=SYSTEM, limit=3, max_tokens=2,
                              template_version=short_template)
    assert run_llm_judge_job(job.pk) == JobStatus.SUCCEEDED
    job.refresh_from_db()
    assert job.solutions_done == 3 and set(judged(job)) == {first.pk, long.pk, last.pk}
    [refused] = [item for item in job.unparsable if "HTTP 400" in item["why"]]
    assert refused["solution_id"] == long.pk and "context" in refused["why"]
    assert not MachineLabel.objects.filter(solution=long).exists()


def test_three_refusals_in_a_row_stop_the_job_with_nothing_of_them_recorded(campaign_factory, endpoint_at,
                                                                            short_template: str,
                                                                            fault_proxy: FaultProxy,
                                                                            served_server: ServedServer) -> None:
    campaign = campaign_factory()
    refused = [too_long(numbered_solution(campaign, 2)) for _ in range(3)]
    endpoint = endpoint_at(fault_proxy.base_url, served_server.model)
    job = start_llm_judge_job(campaign=campaign, endpoint=endpoint, user=SYSTEM, limit=3, max_tokens=2,
                              template_version=short_template)
    assert run_llm_judge_job(job.pk) == JobStatus.FAILED
    job.refresh_from_db()
    assert "refused 3 solutions in a row" in job.error and "HTTP 400" in job.error and job.resumable
    assert job.unparsable == [] and job.solutions_done == 0
    assert not MachineLabel.objects.filter(solution__in=refused).exists()


@pytest.fixture
def five(campaign_factory) -> Iterator[list[Solution]]:
    campaign = campaign_factory()
    yield [numbered_solution(campaign, 2) for _ in range(5)]


def test_a_spent_budget_stops_the_job_resumably(five, endpoint_at, short_template: str, fault_proxy: FaultProxy,
                                                served_server: ServedServer) -> None:
    campaign = five[0].campaign
    # two or three requests' worth of tokens: the job stops once its count reaches the budget
    endpoint = endpoint_at(fault_proxy.base_url, served_server.model, token_budget=100)
    job = start_llm_judge_job(campaign=campaign, endpoint=endpoint, user=SYSTEM, limit=5, max_tokens=2,
                              template_version=short_template)
    assert run_llm_judge_job(job.pk) == JobStatus.FAILED
    job.refresh_from_db()
    assert "token budget spent" in job.error and job.resumable
    assert 0 < job.solutions_done < 5 and job.tokens_used >= 100
    endpoint.token_budget = 10_000  # the operator raises the budget; a resume gets the endpoint's anew
    endpoint.save()
    resume_llm_judge_job(job, user=SYSTEM)
    assert job.status == JobStatus.QUEUED and job.token_budget == job.tokens_used + 10_000
    with pytest.raises(JobInputError, match="nothing left to resume"):
        resume_llm_judge_job(LlmJudgeJob.objects.get(pk=job.pk), user=SYSTEM)
    assert run_llm_judge_job(job.pk) == JobStatus.SUCCEEDED
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED and sorted(judged(job)) == sorted(s.pk for s in five)
    assert {fault_proxy.completed_matching(marker(s)) for s in five} == {1}


def test_the_reaper_stops_a_lost_judge_job_with_the_tokens_it_spent_still_counted(five, endpoint_at,
                                                                                short_template: str) -> None:
    endpoint = endpoint_at("http://127.0.0.1:9/v1", "judge-7b", token_budget=100)
    job = start_llm_judge_job(campaign=five[0].campaign, endpoint=endpoint, user=SYSTEM, limit=5,
                              template_version=short_template)
    # its worker died mid-job, the budget spent: a running row with no heartbeat since
    stale = timezone.now() - runner.heartbeat_timeout() - timedelta(seconds=1)
    LlmJudgeJob.objects.filter(pk=job.pk).update(status=JobStatus.RUNNING, heartbeat_at=stale, tokens_used=100,
                                                 attempts=1, solutions_done=2)
    assert reconcile_llm_judge_jobs() == [job.pk]
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.resumable and "resume it" in job.error
    assert (job.tokens_used, job.token_budget) == (100, 100)
    assert run_llm_judge_job(job.pk) is None  # a redelivered task claims nothing: no run on a fresh budget
    job.refresh_from_db()
    assert (job.status, job.tokens_used, job.token_budget) == (JobStatus.FAILED, 100, 100)


def test_the_key_reaches_the_server_and_nothing_the_job_keeps(campaign_factory, settings, short_template: str,
                                                              keyed_server: ServedServer,
                                                              served_api_key: str) -> None:
    """The worker decrypts the endpoint's key for the request; the job's row (what pages, the API and the broker
    see of it) never holds it, and a wrong key stops the job resumably with a short, keyless error."""
    settings.STEPLAB_ENDPOINT_ALLOW = ["127.0.0.1"]
    campaign = campaign_factory()
    numbered_solution(campaign, 2)
    good = register_endpoint(SYSTEM, campaign=None, name="keyed", base_url=keyed_server.base_url,
                             model=keyed_server.model, api_key=served_api_key)
    job = start_llm_judge_job(campaign=campaign, endpoint=good, user=SYSTEM, limit=1, max_tokens=1,
                              template_version=short_template)
    assert run_llm_judge_job(job.pk) == JobStatus.SUCCEEDED
    wrong = register_endpoint(SYSTEM, campaign=None, name="wrong", base_url=keyed_server.base_url,
                              model=keyed_server.model, api_key="sk-wrong-" + served_api_key[::-1])
    refused = start_llm_judge_job(campaign=campaign, endpoint=wrong, user=SYSTEM, limit=1, max_tokens=1,
                                  template_version=short_template)
    assert run_llm_judge_job(refused.pk) == JobStatus.FAILED
    refused.refresh_from_db()
    assert "refused" in refused.error and refused.resumable
    for row in LlmJudgeJob.objects.values():
        text = repr(row)
        assert served_api_key not in text and served_api_key[::-1] not in text
