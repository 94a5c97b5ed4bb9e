"""Sampling and training job configs from the web: a model only from the models directory (or a built-in name),
prompt templates without format specs, every number bounded — each refusal a 400 naming the key, never a
server path."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from rewards.sampling.config import SamplingConfigError, parse_config

pytestmark = pytest.mark.django_db


@pytest.fixture
def sample_job(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "problems.jsonl").write_text('{"problem": "1+1?"}\n', encoding="utf-8")
    return {"problems": "problems.jsonl", "output": "samples.jsonl"}


@pytest.fixture
def models(tmp_path: Path) -> Path:
    """A models directory with one model folder, and a model folder outside it."""
    root = tmp_path / "models"
    for folder in (root / "tiny-lm", tmp_path / "elsewhere" / "secret-lm"):
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}", encoding="utf-8")
    return root


def test_a_model_folder_in_the_models_directory_is_accepted(sample_job: dict[str, Any], models: Path,
                                                            tmp_path: Path) -> None:
    config = parse_config({**sample_job, "model": "tiny-lm"}, base_dir=tmp_path, models_dir=models)
    assert config.model_path == (models / "tiny-lm").resolve() and config.generator_name == "tiny-lm"
    assert "models_dir" not in config.provenance() and config.provenance()["model"] == "tiny-lm"


@pytest.mark.parametrize("model", ["../elsewhere/secret-lm", "{tmp}/elsewhere/secret-lm", "/etc", "~", ".",
                                   "tiny-lm/../../elsewhere/secret-lm", "missing-lm"])
def test_a_model_outside_the_models_directory_is_refused_without_a_path(sample_job: dict[str, Any], models: Path,
                                                                        tmp_path: Path, model: str) -> None:
    model = model.replace("{tmp}", str(tmp_path))
    with pytest.raises(SamplingConfigError, match=r"config key 'model' must be 'smollm2'") as error:
        parse_config({**sample_job, "model": model}, base_dir=tmp_path, models_dir=models)
    message = str(error.value)
    assert str(models.resolve()) not in message and str((tmp_path / "elsewhere").resolve()) not in message.replace(
        repr(model), "")


@pytest.mark.parametrize(("template", "message"), [
    ("{problem:>1000000000}", "may not use format specs or conversions"),
    ("{problem!r}", "may not use format specs or conversions"),
    ("{problem!s:^99999999}", "may not use format specs or conversions"),
    ("{problem.__class__} {problem}", "may only use the field {problem}, got {problem.__class__}"),
    ("{problem[0]} {problem}", "may only use the field {problem}"),
    ("{} {problem}", "may only use the field {problem}"),
    ("{answer} {problem}", "may only use the field {problem}, got {answer}"),
    ("{problem} " * 5, "at most 4 times"),
    ("{problem}" + "x" * 20_000, "at most 20,000 characters"),
    ("{problem} }", "is not a valid template"),
])
def test_prompt_templates_hold_only_the_problem(sample_job: dict[str, Any], tmp_path: Path, template: str,
                                                message: str) -> None:
    started = time.perf_counter()
    with pytest.raises(SamplingConfigError, match=r"config key 'prompt_template'") as error:
        parse_config({**sample_job, "prompt_template": template}, base_dir=tmp_path)
    assert message in str(error.value)
    assert time.perf_counter() - started < 1, "nothing was rendered"


@pytest.mark.parametrize(("key", "value", "message"), [
    ("n", 10**30, "config key 'n' must be an integer <= 1,024"),
    ("max_new_tokens", 10**9, "config key 'max_new_tokens' must be an integer <= 32,768"),
    ("seed", 2**64, "config key 'seed' must be an integer <= 4,294,967,295"),
    ("limit", 10**12, "config key 'limit' must be an integer <= 10,000,000"),
    ("temperature", float("inf"), "config key 'temperature' must be a number in [0, 10]"),
    ("top_p", float("nan"), "config key 'top_p' must be a number in (0, 1]"),
    ("generator", "g" * 201, "config key 'generator' must be a non-empty string of at most 200"),
])
def test_every_sampling_number_is_bounded(sample_job: dict[str, Any], tmp_path: Path, key: str, value: Any,
                                          message: str) -> None:
    with pytest.raises(SamplingConfigError) as error:
        parse_config({**sample_job, key: value}, base_dir=tmp_path)
    assert message in str(error.value)


# --- through the web ---------------------------------------------------------------------------------------

@pytest.fixture
def web(settings, tmp_path: Path, models: Path, make_user):
    from rewards.models import DatasetVersion
    from tests.factories import CampaignFactory, DatasetVersionFactory, SolutionFactory

    settings.STEPLAB_JOBS_ROOT = tmp_path / "jobs"
    settings.STEPLAB_MODELS_DIR = models
    settings.MEDIA_ROOT = str(tmp_path / "media")
    campaign = CampaignFactory(slug="limits", name="Limits")
    SolutionFactory(campaign=campaign, problem__text="What is $1+1$?", problem__answer="2")
    (tmp_path / "media" / "v1").mkdir(parents=True)
    (tmp_path / "media" / "v1" / "trl.jsonl").write_text("{}\n", encoding="utf-8")
    version = DatasetVersionFactory(campaign=campaign, number=1, status=DatasetVersion.Status.READY,
                                    content_sha256="0" * 64, folder="v1",
                                    files={"trl-stepwise": {"name": "v1/trl.jsonl", "sha256": "0" * 64,
                                                            "bytes": 3, "rows": 1}})
    client = Client()
    client.force_login(get_staff(make_user))
    return {"client": client, "campaign": campaign, "version": version, "tmp": tmp_path}


def get_staff(make_user):
    return make_user("staff-limits", is_staff=True, is_superuser=True)


def _post(client: Client, url: str, body: dict[str, Any]) -> Any:
    return client.post(url, json.dumps(body), content_type="application/json")


@pytest.mark.parametrize(("config", "field", "text"), [
    ({"model": "{tmp}/elsewhere/secret-lm"}, "model", "models directory"),
    ({"model": "../elsewhere/secret-lm"}, "model", "models directory"),
    ({"prompt_template": "{problem:>1000000000}"}, "prompt_template", "format specs"),
    ({"n": 10**30}, "n", "<= 1,024"),
    ({"max_new_tokens": 10**30}, "max_new_tokens", "<= 32,768"),
])
def test_sampling_api_refuses_with_the_field_named(web: dict[str, Any], config: dict[str, Any], field: str,
                                                   text: str) -> None:
    from rewards.jobs.models import SamplingJob

    config = {key: value.replace("{tmp}", str(web["tmp"])) if isinstance(value, str) else value
              for key, value in config.items()}
    response = _post(web["client"], f"/models/api/campaigns/{web['campaign'].slug}/sampling/", {"config": config})
    assert response.status_code == 400, response.content
    body = response.json()
    assert list(body) == [field] and text in body[field][0]
    assert str(web["tmp"] / "models") not in response.content.decode()
    assert not SamplingJob.objects.exists()


def test_sampling_api_accepts_a_model_of_the_models_directory(web: dict[str, Any]) -> None:
    response = _post(web["client"], f"/models/api/campaigns/{web['campaign'].slug}/sampling/",
                     {"config": {"model": "tiny-lm", "n": 2}})
    assert response.status_code == 201, response.content
    job_file = json.loads((Path(response.json()["id"] and _work_dir(response.json()["id"])) / "job.json").read_text())
    assert job_file["model"] == "tiny-lm" and job_file["models_dir"] == str(web["tmp"] / "models")
    # The job file alone confines the sampler wherever it runs.
    from rewards.sampling.config import load_config

    assert load_config(Path(_work_dir(response.json()["id"])) / "job.json").model_path == (
        web["tmp"] / "models" / "tiny-lm").resolve()


def _work_dir(job_id: int) -> str:
    from rewards.jobs.models import SamplingJob

    return SamplingJob.objects.get(pk=job_id).work_dir


@pytest.mark.parametrize(("hyper", "field", "text"), [
    ({"max_steps": 10**30}, "max_steps", "<= 1,000,000"),
    ({"batch_size": 10**6}, "batch_size", "<= 4,096"),
    ({"max_length": 10**30}, "max_length", "<= 32,768"),
    ({"learning_rate": 1e300}, "learning_rate", "(0, 1]"),
    ({"epochs": 10**30}, "epochs", "(0, 1000]"),
])
def test_training_api_refuses_out_of_bounds_hyperparameters(web: dict[str, Any], hyper: dict[str, Any], field: str,
                                                            text: str) -> None:
    from rewards.jobs.models import TrainingJob

    response = _post(web["client"], "/models/api/jobs/",
                     {"kind": "prm", "dataset_version": web["version"].pk, "hyper": hyper})
    assert response.status_code == 400, response.content
    body = response.json()
    assert list(body) == [field] and text in body[field][0]
    assert not TrainingJob.objects.exists()


def test_training_api_refuses_a_base_model_path(web: dict[str, Any]) -> None:
    response = _post(web["client"], "/models/api/jobs/", {"kind": "prm", "dataset_version": web["version"].pk,
                                                         "base_model": str(web["tmp"] / "elsewhere" / "secret-lm")})
    assert response.status_code == 400 and list(response.json()) == ["base_model"]
