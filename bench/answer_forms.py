"""What the neutral answer form buys: the same PRM and ORM (the CPU default head) trained on the same PRM800K rows
with answer lines as written and in the neutral form (``rewards.training.textfeatures.neutral_answers``), judged
on the training problems' held-out tenth and on ProcessBench.

    .venv/bin/python bench/answer_forms.py                 # builds the training files (Django, no database)
    .venv/bin/python bench/answer_forms.py --datasets DIR  # files written by bench/reward_quality.py --write-datasets

ProcessBench (read from ``../shared``, never copied) is cut into two fixed halves by SHA-256 of each item's id: the
dev half may inform a choice (nothing here chooses on it: the threshold in force is the model's own, cross-fitted
on its training problems, and the aggregation is reported for both rules); every figure is on the other half, with
a paired bootstrap interval (over items, the same draws for both forms) of neutral − as written. Also reported:
how often a flawed solution gets its lowest step score on its last step (ties strict), beside how often the data's
first error is there. Prints the figures, then one JSON line (last line).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "steplab.settings")

SHARED = Path(os.environ.get("STEPLAB_SHARED", ROOT.parent / "shared")) / "data"
FORMS = ("as written", "neutral")
DRAWS = 1000


def dev_half(item_id: str) -> bool:
    return int(hashlib.sha256(f"answer-forms:{item_id}".encode()).hexdigest()[:8], 16) % 2 == 0


def auroc(flawed: np.ndarray, suspicion: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(flawed, suspicion))


def first_error_f1(labels: np.ndarray, predicted: np.ndarray) -> float:
    """ProcessBench's F1: harmonic mean of first-error accuracy on flawed and "no error" accuracy on correct."""
    flawed = labels != -1
    hits = predicted == labels
    a, b = hits[flawed].mean(), hits[~flawed].mean()
    return float(2 * a * b / (a + b)) if a + b else 0.0


def lowest_on_last(step_scores: list[list[float]]) -> np.ndarray:
    """Whether each solution's lowest step score is on its last step and strictly below every other step's."""
    return np.array([len(s) > 1 and s[-1] < min(s[:-1]) for s in step_scores])


def evaluate(prm: Any, orm: Any, subset: str, limit: int | None = None) -> dict[str, Any]:
    from rewards.evaluation.step_metrics import first_error_index

    items = json.loads((SHARED / "processbench" / f"{subset}.json").read_text(encoding="utf-8"))
    items = [item for item in items if not dev_half(item["id"])]
    items = items[::max(1, len(items) // limit)][:limit] if limit else items  # spread: the files run in blocks
    pairs = [(item["problem"], item["steps"]) for item in items]
    steps = prm.score_steps_batch(pairs)
    labels = np.array([item["label"] for item in items])
    predicted = np.array([first_error_index(s, prm.threshold) for s in steps])
    return {"labels": labels, "predicted": predicted, "steps": steps,
            "min": -np.array([min(s) for s in steps]), "product": -np.array([float(np.prod(s)) for s in steps]),
            "orm": -np.array(orm.score_solutions(pairs)) if orm is not None else None,
            "last_step_errors": np.array([item["label"] == len(item["steps"]) - 1 for item in items])}


def metrics(run: dict[str, Any], keep: np.ndarray) -> dict[str, float]:
    labels, flawed = run["labels"][keep], run["labels"][keep] != -1
    return {"f1": first_error_f1(labels, run["predicted"][keep]),
            "prm_auroc_min": auroc(flawed, run["min"][keep]), "prm_auroc_product": auroc(flawed, run["product"][keep]),
            **({"orm_auroc": auroc(flawed, run["orm"][keep])} if run["orm"] is not None else {}),
            "lowest_on_last_flawed": float(lowest_on_last([s for s, k in zip(run["steps"], keep, strict=True)
                                                           if k])[flawed].mean())}


def compare(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each form's figures on the reported half, and neutral − as written with a paired 95 % bootstrap interval."""
    n = len(runs[FORMS[0]]["labels"])
    everything = np.ones(n, dtype=bool)
    figures = {form: metrics(run, everything) for form, run in runs.items()}
    rng = np.random.default_rng(0)
    draws: dict[str, list[float]] = {key: [] for key in figures[FORMS[0]]}
    for _ in range(DRAWS):
        pick = rng.integers(0, n, n)
        if len(np.unique(runs[FORMS[0]]["labels"][pick] != -1)) < 2:
            continue
        # the same draw of items for both forms
        sample = {form: {key: (value[pick] if isinstance(value, np.ndarray) else
                               None if value is None else [value[i] for i in pick])
                         for key, value in run.items()} for form, run in runs.items()}
        a, b = (metrics(sample[form], np.ones(n, dtype=bool)) for form in FORMS)
        for key in draws:
            draws[key].append(b[key] - a[key])
    difference = {key: {"value": round(figures["neutral"][key] - figures["as written"][key], 4),
                        "ci95": [round(float(np.percentile(v, 2.5)), 4), round(float(np.percentile(v, 97.5)), 4)]}
                  for key, v in draws.items()}
    data_rate = float(runs[FORMS[0]]["last_step_errors"][runs[FORMS[0]]["labels"] != -1].mean())
    return {"items": n, "flawed": int((runs[FORMS[0]]["labels"] != -1).sum()),
            "figures": {form: {k: round(v, 4) for k, v in f.items()} for form, f in figures.items()},
            "neutral_minus_as_written": difference, "data_first_error_on_last_step": round(data_rate, 4)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=None,
                        help="prm.jsonl and orm.jsonl from bench/reward_quality.py --write-datasets")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--head-model", default="auto", choices=("auto", "linear", "linear+trees"),
                        help="the head's classifier (auto: the default, linear+trees; linear is several times faster)")
    parser.add_argument("--limit", type=int, default=None, help="train on the first N training rows only")
    parser.add_argument("--no-orm", action="store_true", help="the PRM alone (its ORM AUROC is left out)")
    parser.add_argument("--processbench-limit", type=int, default=None,
                        help="N of the reported items of each subset, spread over it (the smoke run's size)")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    started = time.time()
    from rewards.training import load_reward_model, parse_config, run_training

    result: dict[str, Any] = {"bench": "answer_forms", "head_model": args.head_model, "limit": args.limit,
                              "training": {}, "processbench": {}}
    with tempfile.TemporaryDirectory(prefix="answer-forms-") as tmp:
        work = Path(tmp)
        if args.datasets is None:
            import django

            django.setup()
            from reward_quality import build_datasets

            build_datasets(work)
        else:
            for name in ("prm.jsonl", "orm.jsonl"):
                shutil.copyfile(args.datasets / name, work / name)
        runs: dict[str, dict[str, dict[str, Any]]] = {"math": {}, "gsm8k": {}}
        for form in FORMS:
            models = {}
            for kind in ("prm",) if args.no_orm else ("prm", "orm"):
                out = work / f"{kind}-{form.replace(' ', '-')}"
                trained = run_training(parse_config({
                    "kind": kind, "dataset": str(work / f"{kind}.jsonl"), "base_model": "default", "method": "head",
                    "output_dir": str(out), "negative_weight": "balanced", "answers": form,
                    "head_model": args.head_model, **({"limit": args.limit} if args.limit else {})}))
                validation = trained.get("validation") or {}
                result["training"].setdefault(form, {})[kind] = {
                    "heldout_step_auroc": (validation.get("step_level") or {}).get("auroc"),
                    "heldout_solution_auroc": (validation.get("solution_level") or {}).get("auroc"),
                    "threshold": validation.get("threshold"), "heldout_f1": validation.get("f1_calibrated")}
                models[kind] = load_reward_model(out)
            for subset in runs:
                runs[subset][form] = evaluate(models["prm"], models.get("orm"), subset, args.processbench_limit)
            print(f"{form}: trained and scored ({time.time() - started:.0f} s); held-out tenth of the training "
                  f"problems: {result['training'][form]}", flush=True)
    for subset, by_form in runs.items():
        result["processbench"][subset] = compare(by_form)
        report = result["processbench"][subset]
        print(f"ProcessBench {subset}, reported half ({report['items']} items, {report['flawed']} flawed; data's "
              f"first error on the last step: {report['data_first_error_on_last_step']}):")
        for form in FORMS:
            print(f"  {form}: {report['figures'][form]}")
        print(f"  neutral - as written: {report['neutral_minus_as_written']}", flush=True)
    result["seconds"] = round(time.time() - started, 1)
    result["load_average"] = os.getloadavg()[0]
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
