"""Config validation: every problem names its key; the CLI exits non-zero on a bad config."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rewards.training.config import LoraSettings, TrainingConfigError, default_model_path, load_config, parse_config

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def job(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "data.jsonl").write_text("{}\n", encoding="utf-8")
    return {"kind": "prm", "dataset": str(tmp_path / "data.jsonl"), "base_model": "default",
            "output_dir": str(tmp_path / "out")}


def test_defaults_resolve(job: dict[str, Any]) -> None:
    config = parse_config(job)
    assert config.base_model_path == default_model_path()
    assert (config.base_model_path / "config.json").is_file()
    assert config.neutral == "positive" and config.score_aggregation == "product" and config.lora is None
    resolved = json.loads(json.dumps(config.resolved()))
    assert resolved["base_model"] == str(default_model_path())
    assert set(resolved) >= {"kind", "dataset", "output_dir", "learning_rate", "max_length", "neutral", "limit"}
    again = parse_config({**resolved, "lora": {"r": 4}})  # the resolved file is itself a valid job
    assert again.base_model_path == config.base_model_path and again.lora == LoraSettings(r=4)
    assert parse_config(json.loads(json.dumps(again.resolved()))) == again


def test_unknown_key_is_named_with_a_suggestion(job: dict[str, Any]) -> None:
    with pytest.raises(TrainingConfigError,
                       match=r"config key 'lerning_rate' is unknown; did you mean 'learning_rate'\?"):
        parse_config({**job, "lerning_rate": 1e-4})


@pytest.mark.parametrize(("key", "value", "message"), [
    ("kind", "xyz", r"config key 'kind' must be one of prm, orm, got 'xyz'"),
    ("neutral", "maybe", r"config key 'neutral' must be one of positive, negative, exclude"),
    ("score_aggregation", "mean", r"config key 'score_aggregation' must be one of product, min"),
    ("learning_rate", -1, r"config key 'learning_rate' must be in \(0, 1\]"),
    ("learning_rate", "fast", r"config key 'learning_rate' must be a number"),
    ("batch_size", 0, r"config key 'batch_size' must be >= 1"),
    ("batch_size", True, r"config key 'batch_size' must be an integer"),
    ("max_steps", 2.5, r"config key 'max_steps' must be an integer"),
    ("max_length", 8, r"config key 'max_length' must be >= 16"),
    ("eval_fraction", 1.0, r"config key 'eval_fraction' must be in \(0, 1\)"),
    ("bf16", "yes", r"config key 'bf16' must be true or false"),
    ("limit", 0, r"config key 'limit' must be >= 1"),
    ("negative_weight", 0, r"config key 'negative_weight' must be \"balanced\" or a number in \(0, 1000\]"),
    ("negative_weight", "heavy", r"config key 'negative_weight' must be \"balanced\" or a number"),
    ("dedupe_steps", "yes", r"config key 'dedupe_steps' must be true or false"),
    ("lora", "on", r"config key 'lora' must be true, false or an object"),
    ("lora", {"alfa": 4}, r"config key 'lora.alfa' is unknown; did you mean 'lora.alpha'\?"),
    ("lora", {"r": 0}, r"config key 'lora.r' must be >= 1"),
    ("lora", {"target_modules": "query"}, r"config key 'lora.target_modules' must be a non-empty list"),
    ("base_model", "/nonexistent/model", r"config key 'base_model' must be 'default' or a local"),
    ("dataset", "/nonexistent/data.jsonl", r"config key 'dataset' names a file that does not exist"),
    ("dataset", "data.csv", r"config key 'dataset' must name a .jsonl or .parquet file"),
])
def test_bad_values_name_the_key(job: dict[str, Any], key: str, value: Any, message: str) -> None:
    with pytest.raises(TrainingConfigError, match=message):
        parse_config({**job, key: value})


@pytest.mark.parametrize(("key", "value", "message"), [
    ("max_steps", 10**30, r"config key 'max_steps' must be <= 1,000,000"),
    ("batch_size", 4097, r"config key 'batch_size' must be <= 4,096"),
    ("gradient_accumulation_steps", 1025, r"config key 'gradient_accumulation_steps' must be <= 1,024"),
    ("max_length", 10**9, r"config key 'max_length' must be <= 32,768"),
    ("seed", 2**32, r"config key 'seed' must be <= 4,294,967,295"),
    ("seed", -1, r"config key 'seed' must be >= 0"),
    ("limit", 10**12, r"config key 'limit' must be <= 100,000,000"),
    ("logging_steps", 10**7, r"config key 'logging_steps' must be <= 1,000,000"),
    ("epochs", 1001, r"config key 'epochs' must be in \(0, 1000\]"),
    ("epochs", float("inf"), r"config key 'epochs' must be a number"),
    ("learning_rate", float("nan"), r"config key 'learning_rate' must be a number"),
    ("lora", {"r": 10**6}, r"config key 'lora.r' must be <= 1,024"),
    ("lora", {"alpha": 1e9}, r"config key 'lora.alpha' must be in \(0, 10000\]"),
])
def test_every_number_has_an_upper_bound(job: dict[str, Any], key: str, value: Any, message: str) -> None:
    with pytest.raises(TrainingConfigError, match=message):
        parse_config({**job, key: value})


def test_the_bounds_themselves_are_accepted(job: dict[str, Any]) -> None:
    config = parse_config({**job, "max_steps": 1_000_000, "batch_size": 4096, "max_length": 32_768,
                           "seed": 2**32 - 1, "epochs": 1000, "learning_rate": 1, "lora": {"r": 1024}})
    assert config.max_steps == 1_000_000 and config.seed == 2**32 - 1 and config.lora is not None


def test_a_bad_base_model_is_named_as_given_not_as_resolved(job: dict[str, Any], tmp_path: Path) -> None:
    """The error must not reveal where a relative name resolves on the server."""
    with pytest.raises(TrainingConfigError, match=r"config key 'base_model'") as error:
        parse_config({**job, "base_model": "../../somewhere"}, base_dir=tmp_path)
    assert str(tmp_path.parent) not in str(error.value) and "'../../somewhere' is not" in str(error.value)


def test_missing_required_key(job: dict[str, Any]) -> None:
    del job["output_dir"]
    with pytest.raises(TrainingConfigError, match=r"config key 'output_dir' is required"):
        parse_config(job)


def test_lora_forms(job: dict[str, Any]) -> None:
    assert parse_config({**job, "lora": True}).lora == LoraSettings()
    assert parse_config({**job, "lora": False}).lora is None
    custom = parse_config({**job, "lora": {"r": 4, "target_modules": ["query", "key"]}}).lora
    assert custom == LoraSettings(r=4, target_modules=("query", "key"))


def test_relative_paths_are_relative_to_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "data.parquet").write_bytes(b"")
    path = tmp_path / "job.json"
    path.write_text(json.dumps({"kind": "orm", "dataset": "data.parquet", "base_model": "default",
                                "output_dir": "run"}), encoding="utf-8")
    config = load_config(path)
    assert config.dataset == tmp_path / "data.parquet" and config.output_dir == tmp_path / "run"


def test_cli_rejects_bad_config_with_exit_2(job: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    path.write_text(json.dumps({**job, "kind": "xyz"}), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "rewards.training", "train", "--config", str(path)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "config key 'kind' must be one of prm, orm, got 'xyz'" in done.stderr
