"""PRM training throughput: examples/s, tokens/s and (on a GPU) model FLOP utilisation.

    .venv/bin/python bench/training.py                       # CPU, packaged MiniLM, 20 steps of 8 x 256
    python bench/training.py --base-model DIR --bf16 --batch-size 32 --max-length 1024   # on a GPU

Every sequence is filled to ``--max-length`` tokens less the part of a step that did not fit
(whole steps are kept; ``tokens_per_example`` is measured), from real PRM800K step texts when
/work/shared is present, else synthetic ones. The steady
figures leave out the first ``--warmup`` optimizer steps (start-up, CUDA kernels); the overall ones
are Trainer's own. MFU = 6 x parameters x tokens/s / peak FLOP/s (6N per token: forward + backward;
with LoRA the true count is lower, so MFU reads high). Last line: the figures as one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from rewards.training import parse_config, run_training  # noqa: E402

PRM800K = Path("/work/shared/data/prm800k/phase1_train_reconstructed.jsonl")


def _step_texts(limit: int = 4000) -> list[str]:
    """Real step texts when available; the benchmark only needs realistic token statistics."""
    if not PRM800K.is_file():
        return [f"Step {i}: multiply both sides by {i + 2} and simplify to get x = {i * 3}." for i in range(200)]
    texts: list[str] = []
    with PRM800K.open(encoding="utf-8") as handle:
        for line in handle:
            for step in json.loads(line)["label"]["steps"]:
                texts.append(step["completions"][step["chosen_completion"] or 0]["text"])
            if len(texts) >= limit:
                break
    return texts


def write_dataset(path: Path, rows: int, max_length: int) -> None:
    """trl-stepwise rows long enough to fill ``max_length`` (the builder drops the extra steps)."""
    texts = _step_texts()
    cursor = 0
    with path.open("w", encoding="utf-8") as handle:
        for number in range(rows):
            steps: list[str] = []
            words = 0
            while words < max_length:  # words under-count WordPiece/BPE tokens, so this over-fills
                steps.append(texts[cursor % len(texts)])
                words += len(steps[-1].split())
                cursor += 1
            ratings = [1] * (len(steps) - 1) + [-1 if number % 3 == 0 else 1]
            handle.write(json.dumps({"prompt": "Solve the problem step by step.", "completions": steps,
                                     "labels": [r >= 0 for r in ratings], "ratings": ratings,
                                     "split": "train", "problem_id": f"p{number}"}) + "\n")


def _steady(events: list[dict[str, Any]], warmup: int, global_batch: int) -> tuple[float, float]:
    logs = [e for e in events if e["event"] == "log"]
    start = next(e for e in logs if e["step"] >= warmup)
    end = logs[-1]
    span = end["time"] - start["time"]
    if span <= 0:
        raise SystemExit("too few steps after warm-up; raise --steps")
    examples = (end["step"] - start["step"]) * global_batch
    return examples / span, span


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-model", default="default", help="local HF model folder, or 'default' (MiniLM)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3, help="optimizer steps left out of the steady figures")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument("--lora", action="store_true")
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="accelerator peak (H200 bf16 dense: 989)")
    args = parser.parse_args()

    import torch

    with tempfile.TemporaryDirectory(prefix="steplab-bench-") as tmp:
        data = Path(tmp) / "bench.jsonl"
        write_dataset(data, args.steps * args.batch_size, args.max_length)
        config = parse_config({"kind": "prm", "dataset": str(data), "base_model": args.base_model,
                               "output_dir": str(Path(tmp) / "out"), "max_steps": args.steps,
                               "batch_size": args.batch_size, "max_length": args.max_length, "bf16": args.bf16,
                               "gradient_checkpointing": args.gradient_checkpointing, "lora": args.lora,
                               "logging_steps": 1, "seed": 0})
        metrics = run_training(config)
        events = [json.loads(line) for line in (config.output_dir / "events.jsonl").read_text().splitlines()]

    train = metrics["train"]
    tokens_per_example = train["tokens"] / (train["steps"] * train["global_batch_size"])
    steady_examples, steady_span = _steady(events, args.warmup, train["global_batch_size"])
    figures: dict[str, Any] = {
        "device": (torch.cuda.get_device_name(0) if torch.cuda.is_available()
                   else f"cpu ({torch.get_num_threads()} threads)"),
        "base_model": str(config.base_model_path),
        "parameters": metrics["model"]["parameters"],
        "bf16": metrics["model"]["bf16"],
        "steps": train["steps"],
        "batch_size": args.batch_size,
        "max_length": args.max_length,
        "tokens_per_example": round(tokens_per_example, 1),
        "examples_per_s": round(steady_examples, 3),
        "tokens_per_s": round(steady_examples * tokens_per_example, 1),
        "steady_window_s": round(steady_span, 2),
        "examples_per_s_overall": round(train["examples_per_s"], 3),
        "tokens_per_s_overall": round(train["tokens_per_s"], 1),
        "train_runtime_s": round(train["runtime_s"], 2),
    }
    if torch.cuda.is_available():
        achieved = 6 * figures["parameters"] * figures["tokens_per_s"]
        figures["achieved_tflops"] = round(achieved / 1e12, 2)
        figures["peak_tflops"] = args.peak_tflops
        figures["mfu"] = round(achieved / (args.peak_tflops * 1e12), 4)
        figures["max_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    for key, value in figures.items():
        print(f"{key}: {value}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
