"""A finished training job shows the step the trainer ended on, not its last logged step."""
import json
from pathlib import Path

import pytest

from rewards.jobs.models import RewardModel, TrainingJob
from rewards.jobs.services.training import register_model


@pytest.mark.django_db
def test_the_finished_job_shows_the_step_the_trainer_ended_on(tmp_path: Path) -> None:
    metrics = {"kind": "prm", "train": {"steps": 24}, "data": {"train": {"rows_used": 80}}}
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    (tmp_path / "steplab_reward_model.json").write_text("{}")
    job = TrainingJob.objects.create(kind="prm", dataset_path="train.jsonl", output_dir=str(tmp_path),
                                     config={"max_steps": 24, "logging_steps": 10}, step=20, total_steps=24)
    model = register_model(job)
    job.refresh_from_db()
    assert (job.step, job.total_steps) == (24, 24)
    assert RewardModel.objects.get(job=job) == model and model.trained_on == 80
