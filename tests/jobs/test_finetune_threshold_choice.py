"""The sentence the pages give for a fine-tuned PRM's threshold in force: the trainer's own reason, not a guess."""
from __future__ import annotations

from rewards.jobs.figures import threshold_in_force
from rewards.jobs.models import RewardModel
from rewards.training.train import threshold_choice


def test_a_finetuned_prm_without_folds_says_why_its_threshold_is_half() -> None:
    metrics = {"validation": {"threshold": None, "calibration": None, "threshold_choice": threshold_choice(None)}}
    said = threshold_in_force(RewardModel(metrics=metrics))  # unsaved: the sentence reads only its metrics
    assert said.startswith("0.5: a fine-tuned PRM chooses no threshold on its validation rows")
    assert "had no erroneous" not in said


def test_the_crossfitted_fold_sentence_is_kept_for_a_stored_threshold() -> None:
    calibration = {"threshold": 0.42, "f1_calibrated": 0.3, "f1_at_default": 0.2, "folds": 3, "problems": 40}
    metrics = {"validation": {"threshold": 0.42, "calibration": calibration,
                              "threshold_choice": threshold_choice(calibration)}}
    assert threshold_in_force(RewardModel(metrics=metrics)).startswith("42.0 %, chosen on 40 training problems")
    assert threshold_choice(calibration) == "0.42: cross-fitted over 3 folds of 40 training problems, where it beat 0.5"
