"""Reward-model quality on the CPU default: a PRM and an ORM, same backbone and budget, judged on ProcessBench.

    .venv/bin/python bench/reward_quality.py        # the default CPU recipe: about 1 min on 2 idle cores
    .venv/bin/python bench/reward_quality.py --steps 2000 --max-length 512 --base-model DIR   # e.g. on a GPU
    .venv/bin/python bench/reward_quality.py --feature-cache DIR --features context+text:mlp,context:linear
    .venv/bin/python bench/reward_quality.py --write-datasets DIR   # the training files alone, then stop
    python3 bench/reward_quality.py --datasets DIR --pool-size 0 ...  # no Django: a node that has only the ML stack

Training data: the openly licensed PRM800K phase-1 labels in ``shared/data/prm800k`` (train and test
reconstructions). The PRM trains on the ``trl-stepwise`` rows in the ``alternatives`` step mode (built by the
exporter's own ``stepwise_paths``: the chosen path, plus every rated alternative after its chosen prefix); the ORM
on the ``outcome`` rows of the same labelings (the chosen path's final answer graded with ``annotate.grading``
against the MATH answers in ``shared/data/math``; solutions with no gradable answer are left out, as the
exporter does). Both go through ``rewards.training`` (the job runner's trainer) with the same ``max_steps``,
batch size, learning rate and ``max_length``.

Held-out split: the demo's. A dataset version's rows carry the exporter's ``split`` (a tenth of the problems, by
SHA-256 of seed 0 and the problem text's digest), and the demo's compare trains on the other nine tenths and scores
the held-out rows for its step-level table; its versions are in the ``alternatives`` step mode (PRM800K rates
alternatives), so that table's step AUROC counts every step of every held-out row, the chosen prefix once per
alternative. The bench builds the same split and reports that figure ("alternatives") and the labelers' own paths
alone ("chosen", each labeled step once). ``--feature-cache DIR`` keeps the head's text vectors across runs: after
one encode a run is fits and scoring passes (``--features`` lists recipes, each ``recipe[:linear|mlp]``; the
default ``lexical`` reads no vectors at all).

Evaluation: ProcessBench MATH and GSM8K (expert-labelled earliest wrong step; never trained on, not copied into
the project). A fixed dev slice (1 in 5 of each set's items, by SHA-256 of its id) chooses the PRM's first-error
threshold (maximum F1) and the aggregation; every figure is reported on the other 4/5:
* flawed-solution AUROC (a solution is flawed when it has an earliest wrong step) of each model, scoring
  1 − P(correct) (the PRM: its aggregated step scores);
* the PRM's first-error accuracy on erroneous and on correct solutions, and their harmonic mean (F1);
* best-of-N on the demo's candidate pool (AIME 2025 I+II, 64 real samples per problem; ``--pool-size`` keeps
  the first K per problem to bound CPU time): PRM, ORM, majority vote, pass@N.

Without Django (a GPU node has the ML stack and nothing else): ``--datasets DIR`` reads the training files that
``--write-datasets DIR`` wrote on a machine with the project installed, and ``--pool-size 0`` leaves out best-of-N
(its pool parser and grader live in Django apps); ProcessBench is read from ``$STEPLAB_SHARED/data/processbench``.
``bench/device_pack.py`` packs all of it, with a half-precision copy of the default backbone, for such a node.

Prints the figures, then one JSON line (last line).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "steplab.settings")

SHARED = Path(os.environ.get("STEPLAB_SHARED", "/work/shared")) / "data"
HELD_OUT_FRACTION = 0.1  # the exporter's default test_fraction: the demo's dataset versions hold this out


def _django() -> None:
    """The exporter's path builder, the grader and the pool parser live in Django apps (no database is used)."""
    import django

    django.setup()


def _positions(row: dict[str, Any]) -> list[Any]:
    from rewards.exports import StepPosition

    positions = []
    for step in row["label"]["steps"]:
        human = step.get("human_completion")
        human_text = human.get("text") if isinstance(human, dict) else human
        candidates = tuple((c["text"], c["rating"]) for c in step.get("completions") or [])
        positions.append(StepPosition(candidates, step.get("chosen_completion"), human_text or None))
    return positions


def build_datasets(work: Path) -> dict[str, Any]:
    """The PRM (alternatives) and ORM (graded outcome) training files from the phase-1 labels."""
    import random

    from annotate.grading import answers_match
    from annotate.models import text_digest
    from demo.loader import final_answer_of
    from rewards.exports import split_of, stepwise_paths

    answers = {}
    for line in (SHARED / "math" / "math_train.jsonl").open(encoding="utf-8"):
        item = json.loads(line)
        answers[item["problem"].strip()] = item["answer"]
    prm_rows, orm_rows = [], []
    digests: dict[str, str] = {}  # a problem's digest is its first row's text's, as the importer keeps that text
    counts = {"labelings": 0, "chosen_steps": 0, "chosen_negatives": 0, "alternative_rows": 0,
              "alternative_negatives": 0, "outcome_correct": 0, "outcome_wrong": 0, "outcome_ungradable": 0}
    for name in ("phase1_train_reconstructed.jsonl", "phase1_test_reconstructed.jsonl"):
        for line in (SHARED / "prm800k" / name).open(encoding="utf-8"):
            row = json.loads(line)
            if row["label"]["finish_reason"] not in ("solution", "found_error"):  # the exporter's default
                continue
            counts["labelings"] += 1
            problem = row["question"]["problem"]
            path, alternatives = stepwise_paths(_positions(row), "positive")
            digest = digests.setdefault(problem.strip(), text_digest(problem))
            # the demo's split: the exporter's (seed 0, a tenth of the problems held out, by problem text digest)
            split, pid = split_of(digest, 0, HELD_OUT_FRACTION), digest[:16]
            for number, steps in enumerate(([path] if path else []) + alternatives):
                prm_rows.append({"prompt": problem, "completions": [t for t, _, _ in steps],
                                 "labels": [lab for _, lab, _ in steps], "ratings": [r for _, _, r in steps],
                                 "split": split, "problem_id": pid,
                                 "path": "chosen" if path and number == 0 else "alternative"})
            counts["chosen_steps"] += len(path)
            counts["chosen_negatives"] += sum(not lab for _, lab, _ in path)
            counts["alternative_rows"] += len(alternatives)
            counts["alternative_negatives"] += sum(not steps[-1][1] for steps in alternatives)
            truth = row["question"].get("ground_truth_answer")
            truth = answers.get(problem.strip()) if truth in (None, "None") else truth
            texts = [t for t, _, _ in path]
            verdict = answers_match(truth, final_answer_of(texts)) if path else None
            if verdict is None:
                counts["outcome_ungradable"] += 1
                continue
            counts["outcome_correct" if verdict else "outcome_wrong"] += 1
            orm_rows.append({"prompt": problem, "completion": "\n".join(texts), "label": verdict,
                             "split": split, "problem_id": pid})
    # Shuffled (seeded): a budget smaller than an epoch then sees every problem, not the file's first ones.
    random.Random(0).shuffle(prm_rows)
    for file, rows in (("prm.jsonl", prm_rows), ("orm.jsonl", orm_rows)):
        with (work / file).open("w", encoding="utf-8") as handle:
            for item in rows:
                handle.write(json.dumps(item) + "\n")
    counts["prm_rows"], counts["orm_rows"] = len(prm_rows), len(orm_rows)
    return counts


def train(kind: str, dataset: Path, out: Path, args: argparse.Namespace, features: str = "lexical", *,
          head_model: str | None = None) -> dict[str, Any]:
    """One model trained through the job runner's trainer; ``features`` and ``head_model`` (default: the
    ``--head-model`` argument) choose the head's recipe."""
    from rewards.training import parse_config, run_training

    job: dict[str, Any] = {
        "kind": kind, "dataset": str(dataset), "base_model": args.base_model, "output_dir": str(out),
        "max_length": args.max_length, "seed": args.seed, "negative_weight": args.negative_weight,
        "score_aggregation": args.aggregation, "method": args.method,
        # no eval_fraction: the rows' own split column, the demo's held-out tenth of the problems (the exporter's
        # split); a head's first-error threshold is chosen on the training problems, a fine-tuned model's there
    }
    if args.method == "head":  # every label: the head's budget is its optimizer's iterations
        job.update(feature_cache=str(getattr(args, "feature_cache", None) or out.parent / "features"),
                   head_features=features)
        if head_model or getattr(args, "head_model", None):  # unset: the recipe's default classifier
            job["head_model"] = head_model or args.head_model
    else:  # only the rows the budget reaches are tokenized (32k PRM rows take a minute on a busy CPU)
        job.update(max_steps=args.steps, learning_rate=args.learning_rate, batch_size=args.batch_size,
                   logging_steps=max(args.steps // 5, 1), limit=args.steps * args.batch_size, max_eval_rows=300)
    started = time.time()
    metrics = run_training(parse_config(job))
    validation = metrics.get("validation") or {}
    return {"seconds": round(time.time() - started, 1), "loss": round(metrics["train"]["loss"], 4),
            "examples_per_s": round(metrics["train"]["examples_per_s"], 2), "data": metrics["data"]["train"],
            "negative_weight": metrics["train"]["negative_weight"], "features": metrics["data"].get("features"),
            "heldout_step_auroc": (validation.get("step_level") or {}).get("auroc"),
            "heldout_solution_auroc": (validation.get("solution_level") or {}).get("auroc"),
            "threshold": validation.get("threshold"), "heldout_f1_calibrated": validation.get("f1_calibrated"),
            "heldout_f1_at_0.5": validation.get("f1_at_default"),
            # what the threshold buys over 0.5 there, paired over the held-out problems (a head's only)
            "heldout_f1_gain": ((validation.get("intervals") or {}).get("first_error_f1_gain"))}


def heldout_step_auroc(prm: Any, dataset: Path) -> dict[str, Any]:
    """The PRM's step AUROC on the held-out (test split) rows of its training file, as the demo's step-level
    table computes it (every step of every held-out row against its rating, neutral counted as correct):
    ``alternatives`` is the demo's figure (its versions are in that step mode: a rated alternative's row repeats
    the chosen prefix), ``chosen`` the labelers' own paths only (each labeled step once)."""
    from rewards.evaluation.intervals import step_level_intervals

    rows = [json.loads(line) for line in dataset.open(encoding="utf-8")]
    held = [row for row in rows if row["split"] == "test"]
    figures: dict[str, Any] = {}
    for mode, chosen in (("alternatives", held), ("chosen", [r for r in held if r["path"] == "chosen"])):
        scores = prm.score_steps_batch([(row["prompt"], row["completions"]) for row in chosen])
        ratings = [rating for row in chosen for rating in row["ratings"]]
        # the figure and its interval as the compare's table computes them: neutral steps counted as correct,
        # drawn over held-out problems, each with all its rows
        intervals = step_level_intervals(scores, [row["ratings"] for row in chosen],
                                         groups=[row["problem_id"] for row in chosen], threshold=0.5)
        auroc = {k: None if v is None else round(v, 4) for k, v in intervals["step_auroc"].items()}
        figures[mode] = {"rows": len(chosen), "problems": intervals["problems"],
                         "steps": sum(len(row_scores) for row_scores in scores),
                         "negatives": sum(rating == -1 for rating in ratings),
                         "auroc": auroc["value"], "auroc_ci": [auroc["low"], auroc["high"]]}
    return figures


def heldout_solution_auroc(prm: Any, orm: Any, dataset: Path) -> dict[str, Any]:
    """PRM and ORM solution AUROC on the same held-out solutions (the ORM file's held-out problems, outcome
    labels): which model better tells a right final answer from a wrong one."""
    from rewards.training.data import read_dataset, split_rows
    from rewards.training.head import orm_steps

    _, held = split_rows(read_dataset(dataset, "orm"), None, 0)
    pairs = [(row.prompt, orm_steps(row.completion)) for row in held]
    truth = np.array([row.label for row in held])
    prm_scores = np.array(prm.score_solutions(pairs))
    orm_scores = np.array(orm.score_solutions(pairs))
    return {"solutions": len(held), "correct": int(truth.sum()),
            "prm": _auroc(truth, prm_scores), "orm": _auroc(truth, orm_scores)}


def _dev(item_id: str) -> bool:
    return int(hashlib.sha256(item_id.encode()).hexdigest()[:8], 16) % 5 == 0


def _auroc(flawed: np.ndarray, suspicion: np.ndarray) -> float | None:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(flawed, suspicion)) if 0 < flawed.sum() < len(flawed) else None


def _aggregate(steps: list[float], how: str) -> float:
    return float(np.prod(steps)) if how == "product" else float(min(steps))


def fit_baselines(dataset: Path) -> dict[str, Any]:
    """The trivial baselines' choices (direction, cut) made on the PRM's training rows, never on ProcessBench."""
    from rewards.evaluation.baselines import BASELINES, fit

    rows = [json.loads(line) for line in dataset.open(encoding="utf-8")]
    train_rows = [row for row in rows if row["split"] != "test" and row.get("ratings")]
    return {name: fit(name, [row["completions"] for row in train_rows], [row["ratings"] for row in train_rows])
            for name in BASELINES}


def baseline_figures(items: list[dict[str, Any]], step_scores: list[list[float]], threshold: float,
                     choices: dict[str, Any]) -> dict[str, Any]:
    """The PRM and every baseline on the same items and the same bootstrap draws (each item its own unit): step
    AUROC over the steps up to the first error (ProcessBench labels no later step), first-error F1 (the PRM at
    ``threshold``, a baseline at its own cut) and flawed-solution AUROC, with the paired PRM − baseline
    differences."""
    from rewards.evaluation.baselines import paired_step_figures

    ratings = [[1] * len(item["steps"]) if item["label"] == -1 else
               [1] * item["label"] + [-1] + [0] * (len(item["steps"]) - item["label"] - 1) for item in items]
    return paired_step_figures(step_scores, ratings, [item["steps"] for item in items], choices,
                               threshold=threshold, neutral="exclude")


def processbench(prm: Any, orm: Any, limit: int | None, thresholds: np.ndarray, *,
                 choices: dict[str, Any] | None = None) -> dict[str, Any]:
    from rewards.evaluation.step_metrics import lowest_step_on_last_rate, processbench_metrics

    results: dict[str, Any] = {}
    for subset in ("math", "gsm8k"):
        items = json.loads((SHARED / "processbench" / f"{subset}.json").read_text(encoding="utf-8"))
        if limit and limit < len(items):  # evenly spread: the files list erroneous solutions before correct ones
            items = [items[i * len(items) // limit] for i in range(limit)]
        pairs = [(item["problem"], item["steps"]) for item in items]
        step_scores = prm.score_steps_batch(pairs)
        orm_scores = np.array(orm.score_solutions(pairs))
        labels = np.array([item["label"] for item in items])
        flawed = labels != -1
        dev = np.array([_dev(item["id"]) for item in items])
        test = ~dev
        dev_scores = [s for s, d in zip(step_scores, dev, strict=True) if d]
        test_scores = [s for s, d in zip(step_scores, dev, strict=True) if not d]
        # threshold: the dev slice's best F1 (ties: the smaller threshold)
        best = max(thresholds, key=lambda t: (np.nan_to_num(processbench_metrics(
            labels[dev], step_scores=dev_scores, threshold=float(t))["f1"]), -t))
        figures = processbench_metrics(labels[test], step_scores=test_scores, threshold=float(best))
        aurocs = {how: _auroc(flawed[test], -np.array([_aggregate(s, how) for s in test_scores]))
                  for how in ("min", "product")}
        dev_aurocs = {how: _auroc(flawed[dev], -np.array([_aggregate(s, how) for s in dev_scores]))
                      for how in ("min", "product")}
        calibrated = processbench_metrics(labels[test], step_scores=test_scores, threshold=prm.threshold)
        results[subset] = {
            "model_threshold": prm.threshold,
            "first_error_model_threshold": {k: (round(v, 4) if isinstance(v, float) else v)
                                            for k, v in calibrated.items()},
            "items": int(test.sum()), "dev_items": int(dev.sum()), "flawed": int(flawed[test].sum()),
            "prm_flawed_auroc": aurocs, "prm_flawed_auroc_dev": dev_aurocs,
            "orm_flawed_auroc": _auroc(flawed[test], -orm_scores[test]),
            "threshold": float(best), "first_error": {k: (round(v, 4) if isinstance(v, float) else v)
                                                      for k, v in figures.items()},
        }
        test_items = [item for item, d in zip(items, dev, strict=True) if not d]
        flawed_scores = [s for s, item in zip(test_scores, test_items, strict=True) if item["label"] != -1]
        flawed_items = [item for item in test_items if item["label"] != -1]
        # an artefact detector puts its lowest score on the last step far more often than the data errs there
        results[subset]["lowest_on_last_flawed"] = {
            "prm": round(lowest_step_on_last_rate(flawed_scores, ties="strict"), 4) if flawed_scores else None,
            "data": round(float(np.mean([item["label"] == len(item["steps"]) - 1 for item in flawed_items])), 4)
            if flawed_items else None}
        if choices:
            results[subset]["baselines"] = baseline_figures(test_items, test_scores, float(best), choices)
    return results


def baseline_lines(doc: dict[str, Any]) -> str:
    """The PRM beside each baseline, every figure with its 95 % interval, and the verdicts on the strongest."""
    from rewards.evaluation.baselines import METRICS, baseline_verdicts

    def cell(figures: dict[str, Any]) -> str:
        if figures.get("value") is None:
            return "n/a"
        return f"{100 * figures['value']:.1f} [{100 * figures['low']:.1f}, {100 * figures['high']:.1f}]"

    lines = ["PRM: " + ", ".join(f"{metric} {cell(doc['model'][metric])}" for metric in METRICS)]
    for name, figures in doc["baselines"].items():
        lines.append(f"{name}: " + ", ".join(f"{metric} {cell(figures[metric])} (PRM − it "
                                             f"{cell(figures['diff'][metric])})" for metric in METRICS))
    return "\n  ".join(lines + baseline_verdicts(doc))


def best_of_n(prm: Any, orm: Any, pool_size: int, aggregation: str, *,
              choices: dict[str, Any] | None = None) -> dict[str, Any]:
    from annotate.grading import answers_match
    from rewards.evaluation.baselines import BEST_OF_N_BASELINES, candidate_scores
    from rewards.evaluation.best_of_n import best_of_n as simulate
    from rewards.evaluation.pools import Pool
    from rewards.jobs.services.pools import parse_line

    pools = []
    rules = choices or {}
    picked: dict[str, list[np.ndarray]] = {name: [] for name in BEST_OF_N_BASELINES if name in rules}
    for name in ("aime2025_I_k64.jsonl", "aime2025_II_k64.jsonl"):
        for line in (SHARED / "bestofn" / name).open(encoding="utf-8"):
            parsed = parse_line(json.loads(line))
            candidates = parsed.candidates[:pool_size]
            pairs = [(parsed.text or "", c.steps or [c.text]) for c in candidates]
            step_scores = prm.score_steps_batch(pairs)
            orm_scores = orm.score_solutions(pairs)
            pools.append(Pool.from_arrays(
                [c.answer for c in candidates], [bool(answers_match(parsed.gold, c.answer)) for c in candidates],
                prm_score=[_aggregate(s, aggregation) for s in step_scores], orm_score=orm_scores,
                problem=parsed.text))
            for baseline in picked:  # the rules pick on the same candidates, choices from the PRM's training rows
                picked[baseline].append(candidate_scores(rules[baseline], [steps for _, steps in pairs]))
    doc = simulate(pools, trials=400, seed=0, baselines=picked or None)
    methods = {**doc["methods"], **(doc.get("baselines") or {})}
    intervals = doc["intervals"]["methods"]
    table = {method: {n: round(100 * v["mean"], 1) for n, v in (methods[method] or {}).items()}
             for method in ("prm", "orm", "majority", "pass", *picked)}
    ci = {method: {n: [round(100 * v["low"], 1), round(100 * v["high"], 1)] for n, v in intervals[method].items()}
          for method in table if method in intervals}
    return {"problems": len(pools), "pool_size": pool_size, "accuracy_percent": table, "ci_percent": ci,
            "paired": dict(doc["intervals"]["paired"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-model", default="default")
    parser.add_argument("--method", default="head", choices=("head", "finetune", "lora"))
    parser.add_argument("--features", default="lexical",
                        help="head: comma-separated step-feature recipes, each optionally :linear, :mlp or "
                             ":linear+trees (the classifier; default --head-model); the first is the reported PRM "
                             "and ORM, the others are PRM variants trained on the same cached features")
    parser.add_argument("--head-model", default=None, choices=("auto", "linear", "mlp", "linear+trees"),
                        help="head: the classifier over the features (auto, the default: linear+trees for the "
                             "lexical recipes, linear for the others)")
    parser.add_argument("--steps", type=int, default=60, help="optimizer steps per model (the same budget)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--negative-weight", default="balanced", help='"balanced" or a number')
    parser.add_argument("--aggregation", default="min", choices=("min", "product"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--processbench-limit", type=int, default=200,
                        help="items per ProcessBench set, evenly spread over the file (0: all 1000 + 400)")
    parser.add_argument("--pool-size", type=int, default=4,
                        help="samples per AIME problem for best-of-N (0: no best-of-N, which needs Django)")
    parser.add_argument("--datasets", type=Path, default=None,
                        help="read prm.jsonl and orm.jsonl (and counts.json) from this folder instead of building "
                             "them from the PRM800K labels (which needs Django)")
    parser.add_argument("--write-datasets", type=Path, default=None,
                        help="build the training files into this folder and stop")
    parser.add_argument("--device", default=None,
                        help="where the trained models score (default: cuda when present, else cpu)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--feature-cache", type=Path, default=None,
                        help="head: keep the backbone's text vectors in this folder across runs (default: a "
                             "temporary one): after one encode, each run is a fit and a scoring pass")
    args = parser.parse_args(argv)
    if args.negative_weight != "balanced":
        args.negative_weight = float(args.negative_weight)
    import torch

    torch.set_num_threads(args.threads)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.write_datasets is not None:
        _django()
        args.write_datasets.mkdir(parents=True, exist_ok=True)
        counts = build_datasets(args.write_datasets)
        (args.write_datasets / "counts.json").write_text(json.dumps(counts), encoding="utf-8")
        print(json.dumps({"bench": "reward_quality", "datasets": str(args.write_datasets), "data": counts}))
        return 0
    if args.datasets is None or args.pool_size:
        _django()
    started = time.time()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="reward-quality-") as tmp:
        work = Path(tmp)
        if args.datasets is None:
            data = build_datasets(work)
        else:
            for name in ("prm.jsonl", "orm.jsonl"):
                shutil.copyfile(args.datasets / name, work / name)
            data = json.loads((args.datasets / "counts.json").read_text(encoding="utf-8"))
        print(f"data: {data['labelings']} labelings; PRM rows {data['prm_rows']} (chosen-path steps "
              f"{data['chosen_steps']}, {data['chosen_negatives']} negative; alternatives {data['alternative_rows']}, "
              f"{data['alternative_negatives']} negative); ORM rows {data['orm_rows']} ({data['outcome_correct']} "
              f"correct, {data['outcome_wrong']} wrong, {data['outcome_ungradable']} without a gradable answer)",
              flush=True)
        training = {}
        recipes = args.features.split(",")
        first, _, first_model = recipes[0].partition(":")
        for kind in ("prm", "orm"):
            training[kind] = train(kind, work / f"{kind}.jsonl", work / kind, args, first,
                                   head_model=first_model or None)
            print(f"{kind}: {training[kind]['seconds']} s, loss {training[kind]['loss']}, negative weight "
                  f"{training[kind]['negative_weight']}, held-out step AUROC {training[kind]['heldout_step_auroc']}, "
                  f"solution AUROC {training[kind]['heldout_solution_auroc']}, threshold "
                  f"{training[kind]['threshold']} (held-out first-error F1 there "
                  f"{training[kind]['heldout_f1_calibrated']}, at 0.5 {training[kind]['heldout_f1_at_0.5']}; "
                  f"gain, paired: {training[kind]['heldout_f1_gain']}), "
                  f"features {training[kind]['features']}", flush=True)
        from rewards.training import load_reward_model

        prm = load_reward_model(work / "prm", device=device, batch_size=16)
        orm = load_reward_model(work / "orm", device=device, batch_size=16)
        scoring_started = time.time()
        thresholds = np.round(np.arange(0.05, 1.0, 0.05), 2)
        choices = fit_baselines(work / "prm.jsonl")
        bench = processbench(prm, orm, args.processbench_limit or None, thresholds, choices=choices)
        heldout = heldout_solution_auroc(prm, orm, work / "orm.jsonl")
        step_heldout = heldout_step_auroc(prm, work / "prm.jsonl")
        bon = best_of_n(prm, orm, args.pool_size, args.aggregation, choices=choices) if args.pool_size else None
        scoring_s = time.time() - scoring_started
        print(f"held-out solutions ({heldout['solutions']}, {heldout['correct']} correct): solution AUROC PRM "
              f"{heldout['prm']} vs ORM {heldout['orm']}", flush=True)
        for mode, figures in step_heldout.items():
            print(f"held-out step AUROC, {mode} rows ({figures['rows']} rows of {figures['problems']} problems, "
                  f"{figures['steps']} steps, {figures['negatives']} rated -1): {figures['auroc']} "
                  f"(95 % CI over problems {figures['auroc_ci'][0]}–{figures['auroc_ci'][1]})"
                  + (" (the demo's step-level figure)" if mode == "alternatives" else ""), flush=True)
        variants = {}
        for number, recipe in enumerate(recipes[1:], 1):
            features, _, model = recipe.partition(":")
            variant = train("prm", work / "prm.jsonl", work / f"prm-{number}", args, features,
                            head_model=model or None)
            scorer = load_reward_model(work / f"prm-{number}", device=device)
            figures = processbench(scorer, orm, args.processbench_limit or None, thresholds)
            steps = heldout_step_auroc(scorer, work / "prm.jsonl")
            variants[recipe] = {"training": variant, "processbench": figures, "heldout_step_auroc": steps}
            print(f"variant {recipe}: held-out step AUROC {steps['alternatives']['auroc']} (alternatives rows), "
                  f"{steps['chosen']['auroc']} (chosen rows); MATH F1 (model threshold) "
                  f"{figures['math']['first_error_model_threshold']['f1']}, dev-slice F1 "
                  f"{figures['math']['first_error']['f1']}; flawed AUROC (min) "
                  f"{figures['math']['prm_flawed_auroc']['min']}; fit {variant['seconds']} s", flush=True)
    def f3(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3f}"

    for subset, figures in bench.items():
        fe = figures["first_error"]
        print(f"ProcessBench {subset} ({figures['items']} items, {figures['flawed']} flawed; dev slice "
              f"{figures['dev_items']}): flawed-solution AUROC PRM {f3(figures['prm_flawed_auroc'][args.aggregation])} "
              f"({args.aggregation}; product {f3(figures['prm_flawed_auroc']['product'])}), ORM "
              f"{f3(figures['orm_flawed_auroc'])}; first error (threshold {figures['threshold']:.2f} from the dev "
              f"slice): erroneous {f3(fe['error_acc'])}, correct {f3(fe['correct_acc'])}, F1 {f3(fe['f1'])}; at the "
              f"model's calibrated threshold {figures['model_threshold']:.3f}: F1 "
              f"{f3(figures['first_error_model_threshold']['f1'])}")
        last = figures["lowest_on_last_flawed"]
        print(f"  lowest score on the last step among flawed solutions (ties strict): PRM {f3(last['prm'])}, the "
              f"data's first errors there {f3(last['data'])}")
        if "baselines" in figures:
            print(f"  {baseline_lines(figures['baselines'])}")
    if bon is not None:
        table = bon["accuracy_percent"]
        print(f"best-of-N on AIME 2025 ({bon['problems']} problems x {bon['pool_size']} samples), accuracy %:")
        for n in table["pass"]:
            ci = bon["ci_percent"]
            print(f"  N={n:>3}: " + "  ".join(f"{method} {table[method].get(n)} {ci.get(method, {}).get(n)}"
                                            for method in table))
    wall = time.time() - started
    print(f"wall {wall:.0f} s (scoring {scoring_s:.0f} s); load average {load_before:.1f} at start, "
          f"{os.getloadavg()[0]:.1f} at end on {os.cpu_count()} cores; peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB", flush=True)
    margin = {subset: round(figures["prm_flawed_auroc"][args.aggregation] - figures["orm_flawed_auroc"], 3)
              if figures["prm_flawed_auroc"][args.aggregation] is not None and figures["orm_flawed_auroc"] is not None
              else None for subset, figures in bench.items()}
    print(json.dumps({"bench": "reward_quality", "recipe": {k: str(v) if isinstance(v, Path) else v
                                                               for k, v in vars(args).items()},
                      "data": data, "training": {k: {x: v[x] for x in ("seconds", "loss", "negative_weight")}
                                                 for k, v in training.items()},
                      "processbench": bench, "prm_minus_orm_flawed_auroc": margin, "best_of_n": bon,
                      "heldout_solution_auroc": heldout, "heldout_step_auroc": step_heldout,
                      "variants": variants,
                      "training_and_scoring_s": round(sum(v["seconds"] for v in training.values()) + scoring_s, 1),
                      "wall_s": round(wall, 1), "load_average_start": round(load_before, 2),
                      "cpus": os.cpu_count(), "device": device}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
