"""Sampling jobs: a local LM's samples become the campaign's candidate pool, provenance carried to labeling work."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotate.permissions import SYSTEM
from tests.labeling_rounds.conftest import HandPool

pytestmark = pytest.mark.django_db


@pytest.fixture
def jobs_root(settings, tmp_path: Path) -> Path:
    settings.STEPLAB_JOBS_ROOT = tmp_path / "jobs"
    return settings.STEPLAB_JOBS_ROOT


@pytest.mark.parametrize("config, field, message", [
    ({"temprature": 0.5}, "temprature", "not a sampling setting you can choose"),
    ({"output": "/tmp/x.jsonl"}, "output", "not a sampling setting you can choose"),
    ({"temperature": 99}, "temperature", "must be a number in [0, 10]"),
    ({"n": 0}, "n", "must be an integer >= 1"),
    ({"model": "/nowhere/model"}, "model", "none of these"),
    ({"prompt_template": "no placeholder"}, "prompt_template", "'{problem}'"),
])
def test_bad_settings_name_the_key_and_queue_nothing(hand_pool: HandPool, jobs_root: Path, config, field: str,
                                                     message: str) -> None:
    from rewards.jobs.models import SamplingJob
    from rewards.jobs.services.sampling import start_sampling_job
    from rewards.jobs.services.training import JobInputError

    with pytest.raises(JobInputError) as error:
        start_sampling_job(hand_pool.campaign, config=config, user=SYSTEM)
    assert error.value.field == field and message in str(error.value)
    assert not SamplingJob.objects.exists()
    assert not list(jobs_root.glob("sample-*")), "a refused job leaves no folder behind"


def test_a_campaign_without_problems_is_refused(campaign_factory, jobs_root: Path) -> None:
    from rewards.jobs.services.sampling import start_sampling_job
    from rewards.jobs.services.training import JobInputError

    with pytest.raises(JobInputError, match="has no problems") as error:
        start_sampling_job(campaign_factory("empty"), config={}, user=SYSTEM)
    assert error.value.field == "campaign"


def test_start_writes_the_problems_and_the_job_file(hand_pool: HandPool, jobs_root: Path,
                                                    django_capture_on_commit_callbacks) -> None:
    from rewards.jobs.services.sampling import start_sampling_job

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        job = start_sampling_job(hand_pool.campaign, config={"n": 3, "temperature": 1.0, "limit": 2}, user=SYSTEM)
    assert len(callbacks) == 1, "the watcher task is sent after commit"
    work = Path(job.work_dir)
    problems = [json.loads(line) for line in (work / "problems.jsonl").read_text().splitlines()]
    expected = sorted((pp.problem for pp in hand_pool.pool.problems.all()), key=lambda p: p.pk)
    assert [p["problem"] for p in problems] == [p.text for p in expected], "the pool's problems, all of them"
    assert json.loads((work / "job.json").read_text()) == {"n": 3, "temperature": 1.0, "limit": 2,
                                                           "problems": "problems.jsonl", "output": "samples.jsonl"}
    assert job.problem_count == 2 and job.status == "queued"


def _sampler_output(job, problems) -> None:
    """What `python -m rewards.sampling sample` leaves in the job folder: samples and its summary line."""
    work = Path(job.work_dir)
    rows = []
    for problem in problems:
        for index, answer in enumerate((problem.answer, "-999")):
            steps = ["We compute.", f"# Answer\n\n{answer}"]
            rows.append({"problem": problem.text, "steps": steps, "solution": "\n".join(steps),
                         "generator": "SmolLM2-135M-Instruct", "sample_index": index,
                         "provenance": {"source": "rewards.generation", "completion_tokens": 7,
                                        "sampling": {"model": "smollm2", "n": 2, "temperature": 0.7}}})
    (work / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (work / "stdout.log").write_text(f'{{"problems": {len(problems)}, "written": {len(rows)}, "tokens_per_s": 12.5}}\n')


def test_samples_become_the_labeling_pool_and_provenance_reaches_the_solutions(
        hand_pool: HandPool, jobs_root: Path, django_capture_on_commit_callbacks) -> None:
    from annotate.models import Solution
    from rewards.jobs.models import Candidate, RewardModel
    from rewards.jobs.services.labeling_rounds import labeling_pool, start_labeling_round
    from rewards.jobs.services.sampling import register_pool, start_sampling_job

    with django_capture_on_commit_callbacks(execute=False):
        job = start_sampling_job(hand_pool.campaign, config={"n": 2}, user=SYSTEM)
    problems = sorted((pp.problem for pp in hand_pool.pool.problems.all()), key=lambda p: p.pk)
    _sampler_output(job, problems)
    register_pool(job)
    job.refresh_from_db()
    assert job.pool is not None and labeling_pool(hand_pool.campaign) == job.pool
    assert job.summary["tokens_per_s"] == 12.5
    candidates = list(Candidate.objects.filter(pool_problem__pool=job.pool))
    assert len(candidates) == 6 and sum(c.is_correct for c in candidates) == 3, "graded on import"
    assert all(c.provenance["sampling"]["temperature"] == 0.7 for c in candidates)

    RewardModel.objects.all().delete()  # no PRM yet: a random generation completes at once
    generation = start_labeling_round(hand_pool.campaign, strategy="random", batch_size=4, config={"seed": 1},
        user=SYSTEM)
    assert generation.status == "completed" and generation.pool == job.pool
    chosen = Solution.objects.filter(campaign=hand_pool.campaign, generation=generation.number)
    assert chosen.count() == 4
    for solution in chosen:
        assert solution.provenance["sampled"]["sampling"] == {"model": "smollm2", "n": 2, "temperature": 0.7}


def test_unusable_sampler_output_fails_with_the_line(hand_pool: HandPool, jobs_root: Path,
                                                     django_capture_on_commit_callbacks) -> None:
    from rewards.jobs.services.sampling import register_pool, start_sampling_job

    with django_capture_on_commit_callbacks(execute=False):
        job = start_sampling_job(hand_pool.campaign, config={}, user=SYSTEM)
    (Path(job.work_dir) / "samples.jsonl").write_text('{"problem": "Unknown?", "steps": []}\n')
    (Path(job.work_dir) / "stdout.log").write_text("")
    with pytest.raises(ValueError, match=r"line 1 field 'steps'"):
        register_pool(job)


@pytest.mark.parametrize("who, status", [("owner", 302), ("staff", 302), ("researcher", 403), ("labeler", 403),
                                         ("outsider", 403), ("other_admin", 404)])
def test_dashboard_form_starts_a_job_for_admins_only(client, personas, hand_pool: HandPool, jobs_root: Path,
                                                     django_capture_on_commit_callbacks, who: str, status: int) -> None:
    from rewards.jobs.models import SamplingJob

    client.force_login(personas(hand_pool.campaign)[who])
    url = f"/models/dashboard/{hand_pool.campaign.slug}/sampling/start/"
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(url, {"n": "2", "temperature": "0.9", "max_new_tokens": "64", "config": '{"limit": 1}'})
    assert response.status_code == status
    assert SamplingJob.objects.count() == (1 if status == 302 else 0)
    if status == 302:
        assert SamplingJob.objects.get().config == {"limit": 1, "n": 2, "temperature": 0.9, "max_new_tokens": 64}
        page = client.get(f"/models/dashboard/{hand_pool.campaign.slug}/").content.decode()
        assert 'data-sampling-job="' in page and "data-start-sampling" in page
        bad = client.post(url, {"n": "2", "temperature": "hot"})
        assert bad.status_code == 400 and 'data-error-for="temperature"' in bad.content.decode()
        bad = client.post(url, {"config": '{"top_p": 0}'})
        assert bad.status_code == 400 and 'data-error-for="top_p"' in bad.content.decode()


def test_command_queues_a_job_and_names_bad_keys(hand_pool: HandPool, jobs_root: Path, tmp_path: Path,
                                                 django_capture_on_commit_callbacks, capsys) -> None:
    from django.core.management import CommandError, call_command

    from rewards.jobs.models import SamplingJob

    config = tmp_path / "sample.json"
    config.write_text('{"n": 2, "top_k": 5}')
    with pytest.raises(CommandError, match="top_k: is not a sampling setting"):
        call_command("sample_candidates", "--campaign", hand_pool.campaign.slug, "--config", str(config))
    config.write_text('{"n": 2,\n "limit": }')
    with pytest.raises(CommandError, match="line 2: not valid JSON"):
        call_command("sample_candidates", "--campaign", hand_pool.campaign.slug, "--config", str(config))
    config.write_text('{"n": 2, "limit": 1}')
    with django_capture_on_commit_callbacks(execute=False):
        call_command("sample_candidates", "--campaign", hand_pool.campaign.slug, "--config", str(config))
    job = SamplingJob.objects.get()
    assert f"sampling job {job.pk} queued (1 problems)" in capsys.readouterr().out
