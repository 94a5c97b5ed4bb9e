"""Steplab reward-model training and scoring; runs without Django or a database.

``python -m rewards.training train --config job.json`` trains a PRM or ORM from an exported dataset;
``load_reward_model(folder)`` scores solutions with the result. Importing this package loads neither
torch nor transformers (the web side can validate configs with ``parse_config`` alone).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .config import TrainConfig, TrainingConfigError, load_config, parse_config

if TYPE_CHECKING:
    from .scoring import ScoringModel

__all__ = ["TrainingConfigError", "TrainConfig", "load_config", "parse_config", "load_reward_model", "run_training"]


def load_reward_model(folder: Any, **options: Any) -> ScoringModel:
    """Load a trained model folder (see ``scoring.load_reward_model``)."""
    from .scoring import load_reward_model as load

    return load(folder, **options)


def run_training(config: TrainConfig) -> dict[str, Any]:
    """Run one training job (see ``pipeline.run_training``); returns ``metrics.json``'s content."""
    from .pipeline import run_training as run

    return run(config).as_dict()
