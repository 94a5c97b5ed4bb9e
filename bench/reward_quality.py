"""Reward-model quality on the CPU default: a PRM and an ORM, same backbone and budget, judged on ProcessBench.

    .venv/bin/python bench/reward_quality.py        # the default CPU recipe: about 1 min on 2 idle cores
    .venv/bin/python bench/reward_quality.py --steps 2000 --max-length 512 --base-model DIR   # e.g. on a GPU
    .venv/bin/python bench/reward_quality.py --feature-cache DIR --features context+text:mlp,context:linear
    .venv/bin/python bench/reward_quality.py --write-datasets DIR   # the training files alone, then stop
    python3 bench/reward_quality.py --datasets DIR --pool-size 0 ...  # no Django: a node that has only the ML stack

Training data: the openly licensed PRM800K phase-1 labels in ``shared/data/prm800k`` (train and test
reconstructions). The PRM trains on the ``trl-stepwise`` rows in the ``alternatives`` step mode (built by the
exporter's own ``stepwise_paths``: the chosen path, plus every rated alternative after its chosen prefix); the ORM
on the ``outcome`` rows of the same labelings (the chosen path's final answer graded with ``stepcore.grading``
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
the project), split by problem into a fixed seeded **dev half** and a **report half** (``dev_half``: SHA-256 of
``DEV_SEED`` and the problem text, so all solutions of a problem sit on one side). Every choice a public benchmark
informs is made on the dev half only — the PRM's first-error threshold (where F1 peaks there) and a second cut and
direction for each trivial baseline (``name@dev half``, beside the baselines whose choices come from the PRM800K
training rows) — and every figure is reported on the report half only. The PRM's solution score (min or product
of its step scores) is chosen on training data: PRM800K's held-out tenth (``--aggregation training``). Reported,
with 95 % intervals from a bootstrap over the report half's problems (the same draws for every scorer, so the
differences are paired):
* the PRM and every baseline: step AUROC (steps up to the first error), first-error F1 and flawed-solution AUROC,
  the paired PRM − baseline difference of each, the strongest baseline per subset and metric and whether the PRM
  beats it on first-error F1 and flawed-solution AUROC (``targets``: the interval of the difference above 0);
* the PRM's F1 at its own threshold (chosen on its training problems); the ORM's flawed-solution AUROC and the
  paired PRM − ORM difference;
* the sanity checks (``rewards.evaluation.sanity``): score change under an answer-format rewrite, log-odds change
  under a harmless prefix, Spearman between the original and a shuffled step order, and the rate of "lowest score
  on the last step" among flawed solutions beside the data's rate of first errors there;
* best-of-N on the demo's candidate pool (AIME 2025 I+II, 64 real samples per problem; ``--pool-size`` keeps
  the first K per problem to bound CPU time): PRM, ORM, majority vote, pass@N and the baselines' picks.

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
from collections.abc import Sequence
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
#: ProcessBench's dev half is fixed by this seed (and each problem's text)
DEV_SEED = 0
AGGREGATIONS = ("min", "product")
#: the figures the PRM must win on against the strongest baseline, per subset
TARGET_METRICS = ("first_error_f1", "flawed_auroc")


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


def datasets_in(work: Path, *, written: Path | None) -> dict[str, Any]:
    """The PRM and ORM training files in ``work``: copied from a folder ``--write-datasets`` wrote, or built."""
    if written is None:
        return build_datasets(work)
    for name in ("prm.jsonl", "orm.jsonl"):
        shutil.copyfile(written / name, work / name)
    return json.loads((written / "counts.json").read_text(encoding="utf-8"))


def build_datasets(work: Path) -> dict[str, Any]:
    """The PRM (alternatives) and ORM (graded outcome) training files from the phase-1 labels."""
    import random

    from annotate.models import text_digest
    from demo.loader import final_answer_of
    from rewards.exports import split_of, stepwise_paths
    from stepcore.grading import answers_match

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
        "method": args.method,
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
    if getattr(args, "aggregation", None) in AGGREGATIONS:  # else the trainer's default; the bench chooses its own
        job["score_aggregation"] = args.aggregation
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


def heldout_solution_auroc(prm: Any, orm: Any, dataset: Path, aggregation: str) -> dict[str, Any]:
    """PRM and ORM solution AUROC on the same held-out solutions (the ORM file's held-out problems, outcome
    labels), with the paired PRM − ORM difference over problems: which model better tells a right final answer
    from a wrong one."""
    from rewards.evaluation.baselines import paired_auroc
    from rewards.training.data import read_dataset, split_rows
    from rewards.training.heads.features import orm_steps

    _, held = split_rows(read_dataset(dataset, "orm"), None, 0)
    pairs = [(row.prompt, orm_steps(row.completion)) for row in held]
    truth = np.array([bool(row.label) for row in held])
    prm_scores = [_aggregate(s, aggregation) for s in prm.score_steps_batch(pairs)]
    figures = paired_auroc(prm_scores, orm.score_solutions(pairs), truth, groups=[row.prompt for row in held])
    return {"solutions": len(held), "correct": int(truth.sum()), "prm": figures["model"], "orm": figures["other"],
            "prm_minus_orm": figures["diff"]}


def dev_half(problem: str, seed: int = DEV_SEED) -> bool:
    """Is ``problem`` in ProcessBench's dev half? Fixed by seed and problem text, so every solution of a problem
    falls on one side; the choices a public benchmark informs are made there, the figures reported on the rest."""
    return int(hashlib.sha256(f"{seed}:{problem.strip()}".encode()).hexdigest()[:8], 16) % 2 == 0


def _aggregate(steps: Sequence[float], how: str) -> float:
    return float(np.prod(steps)) if how == "product" else float(min(steps))


def choose_aggregation(prm: Any, dataset: Path) -> dict[str, Any]:
    """The PRM's solution score (``min`` or ``product`` of its step scores), chosen on training data: the
    flawed-solution AUROC of the held-out tenth of PRM800K's problems, every row (a labeler's own path, or a rated
    alternative after its prefix: the chosen paths alone hold almost no −1) against "has a −1 step" (a tie: min)."""
    from rewards.evaluation.step_metrics import auroc

    rows = [json.loads(line) for line in dataset.open(encoding="utf-8")]
    held = [row for row in rows if row["split"] == "test" and row["completions"]]
    scores = prm.score_steps_batch([(row["prompt"], row["completions"]) for row in held])
    sound = np.array([-1 not in row["ratings"] for row in held])
    figures = {how: auroc([_aggregate(s, how) for s in scores], sound) for how in AGGREGATIONS}
    best = max(AGGREGATIONS, key=lambda how: (np.nan_to_num(figures[how], nan=-1.0), how == "min"))
    return {"aggregation": best, "solutions": len(held), "flawed": int((~sound).sum()),
            "auroc": {how: None if np.isnan(v) else round(v, 4) for how, v in figures.items()}}


def fit_baselines(dataset: Path) -> dict[str, Any]:
    """The trivial baselines' choices (direction, cut) made on the PRM's training rows, never on ProcessBench."""
    from rewards.evaluation.baselines import BASELINES, fit

    rows = [json.loads(line) for line in dataset.open(encoding="utf-8")]
    train_rows = [row for row in rows if row["split"] != "test" and row.get("ratings")]
    return {name: fit(name, [row["completions"] for row in train_rows], [row["ratings"] for row in train_rows])
            for name in BASELINES}


def processbench_ratings(item: dict[str, Any]) -> list[int]:
    """ProcessBench's label as step ratings: +1 before the first error, −1 on it, 0 (left out) after it."""
    steps, label = len(item["steps"]), item["label"]
    return [1] * steps if label == -1 else [1] * label + [-1] + [0] * (steps - label - 1)


def load_processbench(subset: str, limit: int | None) -> list[dict[str, Any]]:
    items = json.loads((SHARED / "processbench" / f"{subset}.json").read_text(encoding="utf-8"))
    if limit and limit < len(items):  # evenly spread: the files list erroneous solutions before correct ones
        items = [items[i * len(items) // limit] for i in range(limit)]
    return items


def sanity_figures(prm: Any, items: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    """The sanity checks (answer-format rewrite, harmless prefix, shuffled steps, lowest score on the last step)
    of the PRM on these items."""
    from rewards.evaluation.sanity import SanitySolution, sanity_checks

    solutions = [SanitySolution(item["problem"], list(item["steps"]), None if item["label"] == -1 else item["label"])
                 for item in items]
    report = sanity_checks(solutions, lambda batch: prm.score_steps_batch([(s.problem, s.steps) for s in batch]),
                           seed=seed)
    return {check: {key: (None if isinstance(value, float) and np.isnan(value) else
                          round(value, 4) if isinstance(value, float) else value) for key, value in figures.items()}
            for check, figures in report.as_dict().items()}


def processbench(prm: Any, orm: Any, limit: int | None, aggregation: str, *,
                 choices: dict[str, Any] | None = None, draws: int = 1000, sanity: bool = True) -> dict[str, Any]:
    """Per subset: the dev half (by problem) chooses the PRM's first-error threshold (where F1 peaks there) and
    a second cut and direction for each baseline; on the report half, the PRM beside every baseline (``choices``
    from the PRM's training rows, and ``name@dev half``) with paired intervals over problems, the ORM's
    flawed-solution AUROC beside the PRM's, the F1 at the model's own threshold and the sanity checks."""
    from rewards.evaluation.baselines import BASELINES, fit, paired_auroc, paired_step_figures
    from rewards.evaluation.step_metrics import calibrate_threshold

    results: dict[str, Any] = {}
    for subset in ("math", "gsm8k"):
        items = load_processbench(subset, limit)
        pairs = [(item["problem"], item["steps"]) for item in items]
        step_scores = prm.score_steps_batch(pairs)
        orm_scores = np.array(orm.score_solutions(pairs))
        dev = np.array([dev_half(item["problem"]) for item in items])
        dev_items = [item for item, d in zip(items, dev, strict=True) if d]
        report = [item for item, d in zip(items, dev, strict=True) if not d]
        dev_scores = [s for s, d in zip(step_scores, dev, strict=True) if d]
        report_scores = [s for s, d in zip(step_scores, dev, strict=True) if not d]
        calibration = calibrate_threshold([item["label"] for item in dev_items], dev_scores)
        threshold = calibration["threshold"] if calibration["threshold"] is not None else 0.5
        dev_ratings = [processbench_ratings(item) for item in dev_items]
        rules = dict(choices or {})
        for name in BASELINES:
            if name != "random":  # a seeded draw has nothing to choose
                rules[f"{name}@dev half"] = fit(name, [item["steps"] for item in dev_items], dev_ratings,
                                                neutral="exclude")
        groups = [item["problem"].strip() for item in report]
        ratings = [processbench_ratings(item) for item in report]
        steps = [item["steps"] for item in report]
        figures = paired_step_figures(report_scores, ratings, steps, rules, groups=groups, threshold=threshold,
                                      neutral="exclude", aggregation=aggregation, draws=draws)
        own = paired_step_figures(report_scores, ratings, steps, {}, groups=groups, threshold=prm.threshold,
                                  neutral="exclude", aggregation=aggregation, draws=draws)
        sound = np.array([item["label"] == -1 for item in report])
        orm_report = orm_scores[~dev]
        versus_orm = paired_auroc([_aggregate(s, aggregation) for s in report_scores], orm_report, sound,
                                  groups=groups, draws=draws)
        results[subset] = {
            "items": len(report), "problems": len(set(groups)), "flawed": int((~sound).sum()),
            "dev_items": len(dev_items), "dev_problems": len({item["problem"].strip() for item in dev_items}),
            "threshold": threshold, "threshold_dev_f1": calibration["f1_calibrated"],
            "model_threshold": prm.threshold, "aggregation": aggregation,
            "figures": figures, "first_error_f1_model_threshold": own["model"]["first_error_f1"],
            "orm_flawed_auroc": versus_orm["other"], "prm_minus_orm_flawed_auroc": versus_orm["diff"],
        }
        if sanity:
            results[subset]["sanity"] = sanity_figures(prm, report, seed=0)
    return results


def target_met(figures: dict[str, Any]) -> dict[str, Any]:
    """Per target metric (first-error F1, flawed-solution AUROC): the strongest baseline on the report half and
    whether the paired interval of PRM − it lies above 0."""
    out = {}
    for metric in TARGET_METRICS:
        name = figures["strongest"][metric]
        diff = figures["baselines"][name]["diff"][metric] if name else {}
        out[metric] = {"strongest": name, "diff": diff, "met": bool(diff.get("low") is not None and diff["low"] > 0)}
    return out


def _cell(figures: dict[str, Any]) -> str:
    if figures.get("value") is None:
        return "n/a"
    return f"{100 * figures['value']:.1f} [{100 * figures['low']:.1f}, {100 * figures['high']:.1f}]"


def baseline_lines(doc: dict[str, Any]) -> str:
    """The PRM beside each baseline, every figure with its 95 % interval, and the verdicts on the strongest."""
    from rewards.evaluation.baselines import METRICS, baseline_verdicts

    lines = ["PRM: " + ", ".join(f"{metric} {_cell(doc['model'][metric])}" for metric in METRICS)]
    for name, figures in doc["baselines"].items():
        lines.append(f"{name}: " + ", ".join(f"{metric} {_cell(figures[metric])} (PRM − it "
                                             f"{_cell(figures['diff'][metric])})" for metric in METRICS))
    return "\n  ".join(lines + baseline_verdicts(doc))


def print_processbench(bench: dict[str, Any]) -> None:
    for subset, figures in bench.items():
        print(f"ProcessBench {subset}, report half ({figures['items']} items of {figures['problems']} problems, "
              f"{figures['flawed']} flawed; the dev half, {figures['dev_items']} items of {figures['dev_problems']} "
              f"problems, chose the threshold {figures['threshold']:.3f}): PRM ({figures['aggregation']}) "
              f"flawed-solution AUROC {_cell(figures['figures']['model']['flawed_auroc'])}, ORM "
              f"{_cell(figures['orm_flawed_auroc'])}, PRM − ORM {_cell(figures['prm_minus_orm_flawed_auroc'])}; "
              f"first-error F1 {_cell(figures['figures']['model']['first_error_f1'])}, at the model's own threshold "
              f"{figures['model_threshold']:.3f} {_cell(figures['first_error_f1_model_threshold'])}")
        print(f"  {baseline_lines(figures['figures'])}")
        for metric, verdict in target_met(figures["figures"]).items():
            print(f"  target {metric}: strongest baseline {verdict['strongest']}, PRM − it "
                  f"{_cell(verdict['diff'])}: {'met' if verdict['met'] else 'NOT met'}")
        sanity = figures.get("sanity")
        if sanity:
            last = sanity["last_step_lowest"]
            print(f"  sanity: answer-format rewrite mean |Δ score| {sanity['answer_rewrite']['mean_abs_change']} "
                  f"({sanity['answer_rewrite']['n']} steps); harmless prefix Δ log-odds "
                  f"{sanity['harmless_prefix']['mean_logit_change']} per step; shuffle Spearman "
                  f"{sanity['shuffle']['spearman']}; lowest score on the last step among flawed solutions (ties "
                  f"strict) {last['model_rate']} vs the data's first errors there {last['data_rate']} "
                  f"({last['n']} flawed)")


def best_of_n(prm: Any, orm: Any, pool_size: int, aggregation: str, *,
              choices: dict[str, Any] | None = None) -> dict[str, Any]:
    from rewards.evaluation.baselines import BEST_OF_N_BASELINES, candidate_scores
    from rewards.evaluation.best_of_n import best_of_n as simulate
    from rewards.evaluation.pools import Pool
    from rewards.jobs.services.pools import parse_line
    from stepcore.grading import answers_match

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
            for baseline, scores in picked.items():  # the rules pick on the same candidates, chosen on training rows
                scores.append(candidate_scores(rules[baseline], [steps for _, steps in pairs]))
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
    parser.add_argument("--aggregation", default="training", choices=("training", *AGGREGATIONS),
                        help="the PRM's solution score: min or product of its step scores, or (the default) the "
                             "one with the higher flawed-solution AUROC on PRM800K's held-out tenth")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--processbench-limit", type=int, default=200,
                        help="items per ProcessBench set, evenly spread over the file (0: all 1000 + 400)")
    parser.add_argument("--draws", type=int, default=1000, help="bootstrap draws of every interval")
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
        data = datasets_in(work, written=args.datasets)
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
        aggregation = (choose_aggregation(prm, work / "prm.jsonl") if args.aggregation == "training"
                       else {"aggregation": args.aggregation})
        how = aggregation["aggregation"]
        print(f"aggregation: {how} ({aggregation})", flush=True)
        choices = fit_baselines(work / "prm.jsonl")
        bench = processbench(prm, orm, args.processbench_limit or None, how, choices=choices, draws=args.draws)
        heldout = heldout_solution_auroc(prm, orm, work / "orm.jsonl", how)
        step_heldout = heldout_step_auroc(prm, work / "prm.jsonl")
        bon = best_of_n(prm, orm, args.pool_size, how, choices=choices) if args.pool_size else None
        scoring_s = time.time() - scoring_started
        print(f"held-out solutions ({heldout['solutions']}, {heldout['correct']} correct): solution AUROC PRM "
              f"{_cell(heldout['prm'])} vs ORM {_cell(heldout['orm'])}, PRM − ORM {_cell(heldout['prm_minus_orm'])}",
              flush=True)
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
            figures = processbench(scorer, orm, args.processbench_limit or None, how, draws=args.draws,
                                   sanity=False)
            steps = heldout_step_auroc(scorer, work / "prm.jsonl")
            variants[recipe] = {"training": variant, "processbench": figures, "heldout_step_auroc": steps}
            model_figures = figures["math"]["figures"]["model"]
            print(f"variant {recipe}: held-out step AUROC {steps['alternatives']['auroc']} (alternatives rows), "
                  f"{steps['chosen']['auroc']} (chosen rows); MATH report half F1 (dev-half threshold) "
                  f"{_cell(model_figures['first_error_f1'])}, at the model's threshold "
                  f"{_cell(figures['math']['first_error_f1_model_threshold'])}; flawed AUROC ({how}) "
                  f"{_cell(model_figures['flawed_auroc'])}; fit {variant['seconds']} s", flush=True)
    print_processbench(bench)
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
    targets = {subset: target_met(figures["figures"]) for subset, figures in bench.items()}
    print(json.dumps({"bench": "reward_quality", "recipe": {k: str(v) if isinstance(v, Path) else v
                                                               for k, v in vars(args).items()},
                      "data": data, "training": {k: {x: v[x] for x in ("seconds", "loss", "negative_weight")}
                                                 for k, v in training.items()},
                      "aggregation": aggregation, "processbench": bench, "targets": targets, "best_of_n": bon,
                      "heldout_solution_auroc": heldout, "heldout_step_auroc": step_heldout,
                      "variants": variants,
                      "training_and_scoring_s": round(sum(v["seconds"] for v in training.values()) + scoring_s, 1),
                      "wall_s": round(wall, 1), "load_average_start": round(load_before, 2),
                      "cpus": os.cpu_count(), "device": device}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
