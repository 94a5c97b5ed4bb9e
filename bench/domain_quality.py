"""PRM vs ORM vs majority vote per domain on MMLU-Pro: a math PRM applied beyond math.

    .venv/bin/python bench/domain_quality.py --feature-cache var/domain-quality   # a rerun reuses the vectors

Training: ``bench/reward_quality.py``'s own ``build_datasets`` and ``train`` (imported, not copied), with its
options and defaults: the CPU default PRM and ORM (the head; its default recipe reads no backbone) on the
openly licensed PRM800K phase-1 labels, the same recipe, method and budget for both. With ``--feature-cache
DIR`` the models (and, for a recipe that reads vectors, the text vectors) stay in DIR (``DIR/features``): a
rerun encodes nothing it encoded before (scoring texts included), so only the heads are fitted again. The PRM's
solution score (min or product of its step scores) is chosen on training data, PRM800K's held-out tenth
(``reward_quality.choose_aggregation``), and the baselines' choices on the PRM's training rows: nothing is chosen
on the MMLU-Pro answers reported. ``--datasets DIR`` trains on other files (the smoke test's tiny ones),
``--questions K`` keeps the first K questions of each domain.

Pools: what ``./run demo`` imports, chosen by ``demo.loader``'s own functions (the project's copy of
``shared/data/mmlu-pro``): campaign demo-mmlu's pool (the first 15 questions of each of its 6 non-math
categories, every model's answer) and the math demo's headroom pool (MMLU-Pro's 60 math questions). Each answer
is split into sentences and graded by the letter it chose, as the pool importer does; the prompt is the question
text, as scoring a pool reads it.

Figures, per domain (category), for all non-math domains together and for the math pool: best-of-N accuracy at
N = 1, 4, 11 (the paper's protocol, ``rewards.evaluation.best_of_n``: ``--trials`` random draws of N answers)
for PRM, ORM, majority vote and pass@N, each with a seeded bootstrap 95 % interval over questions, and the paired
PRM − ORM and PRM − majority differences with their intervals and verdict (``rewards.evaluation.intervals``).

Prints a table, then one JSON line (last line).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from collections import defaultdict
from math import prod
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.reward_quality import (  # noqa: E402 - importable once the root is on the path
    AGGREGATIONS,
    choose_aggregation,
    datasets_in,
    fit_baselines,
    train,
)

NS = (1, 4, 11)
POOL_SIZE = 11  # MMLU-Pro's 11 models: one answer each
MATH = "math (headroom pool)"
NON_MATH = "all 6 non-math domains"
METHODS = ("prm", "orm", "majority", "pass")


def candidate_rows(math: bool, questions_per_domain: int | None = None) -> list[dict[str, Any]]:
    """Every answer of a demo pool's questions (the first ``questions_per_domain`` of each domain when given):
    domain, question id and text, its sentences, chosen letter and verdict (graded against the question's letter
    with the multiple-choice grader, as the pool importer does)."""
    from demo.loader import mmlu_pool_questions, mmlu_questions, pool_rows
    from rewards.jobs.services.pools import parse_line
    from stepcore.graders import get_grader

    grader = get_grader("multiple_choice")
    questions = mmlu_questions(math=True) if math else mmlu_pool_questions(mmlu_questions(math=False))
    if questions_per_domain:
        taken: dict[str, int] = defaultdict(int)
        kept = []
        for question in questions:
            if taken[question["category"]] < questions_per_domain:
                taken[question["category"]] += 1
                kept.append(question)
        questions = kept
    by_id = {str(row["question_id"]): row for row in questions}
    rows = []
    for row in pool_rows({int(key) for key in by_id}):
        question = by_id[row["problem_id"]]
        candidate = parse_line(row, "sentence", grader).candidates[0]
        rows.append({"domain": MATH if math else question["category"], "question_id": row["problem_id"],
                     "prompt": question["question"], "steps": candidate.steps, "answer": candidate.answer,
                     "is_correct": bool(grader.grade(question["answer"], candidate.answer)),
                     "model": row["provenance"]["model"]})
    return rows


def score(rows: list[dict[str, Any]], prm: Any, orm: Any, aggregation: str) -> float:
    """Adds ``prm_score`` (the steps' scores aggregated) and ``orm_score`` to each row; returns the seconds.
    One domain at a time, so an interrupted run keeps the vectors of the domains it finished."""
    started = time.time()
    by_domain: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_domain[row["domain"]].append(row)
    for domain, group in by_domain.items():
        pairs = [(row["prompt"], row["steps"]) for row in group]
        step_scores = prm.score_steps_batch(pairs)
        orm_scores = orm.score_solutions(pairs)
        for row, steps, solution in zip(group, step_scores, orm_scores, strict=True):
            row["prm_score"] = min(steps) if aggregation == "min" else prod(steps)
            row["orm_score"] = float(solution)
        print(f"scored {domain}: {len(group)} answers, {time.time() - started:.0f} s so far", flush=True)
    return time.time() - started


def figures(rows: list[dict[str, Any]], trials: int, seed: int, choices: dict[str, Any]) -> dict[str, Any]:
    """Best-of-N with intervals and the paired verdict for one set of answers (grouped by question), the baselines'
    picks beside them (``choices``: made on the PRM's training rows) with the verdict on the strongest."""
    from rewards.evaluation.baselines import BEST_OF_N_BASELINES, best_of_n_baseline_verdict, candidate_scores
    from rewards.evaluation.best_of_n import best_of_n
    from rewards.evaluation.intervals import verdict
    from rewards.evaluation.pools import Pool

    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[row["question_id"]].append(row)
    pools = [Pool.from_arrays([r["answer"] for r in group], [r["is_correct"] for r in group],
                              prm_score=[r["prm_score"] for r in group], orm_score=[r["orm_score"] for r in group],
                              problem=question) for question, group in grouped.items()]
    picked = {name: [candidate_scores(choices[name], [r["steps"] for r in group]) for group in grouped.values()]
              for name in BEST_OF_N_BASELINES}
    doc = best_of_n(pools, ns=NS, trials=trials, seed=seed, pool_size=POOL_SIZE, baselines=picked)
    bounds = doc["intervals"]["methods"]
    methods = {**doc["methods"], **doc["baselines"]}
    table = {method: {str(n): {"mean": round(100 * methods[method][str(n)]["mean"], 1),
                               "low": round(100 * bounds[method][str(n)]["low"], 1),
                               "high": round(100 * bounds[method][str(n)]["high"], 1)} for n in NS}
             for method in (*METHODS, *BEST_OF_N_BASELINES)}
    paired = {pair: {n: {key: round(100 * value, 1) for key, value in figures_at_n.items()}
                     for n, figures_at_n in by_n.items()} for pair, by_n in doc["intervals"]["paired"].items()}
    return {"questions": len(pools), "answers": len(rows), "answered": sum(r["answer"] is not None for r in rows),
            "correct": sum(r["is_correct"] for r in rows), "percent": table, "paired_points": paired,
            "verdict": verdict(doc["intervals"]["paired"]),
            "baseline_verdict": best_of_n_baseline_verdict(doc["baselines"], doc["intervals"]["paired"], str(NS[-1]))}


def report(results: dict[str, dict[str, Any]]) -> None:
    def cell(figure: dict[str, float]) -> str:
        return f"{figure['mean']:5.1f} [{figure['low']:4.1f}–{figure['high']:5.1f}]"

    shown = [*METHODS, "length", "position", "random"]
    print(f"\n{'domain':<24} {'q':>3} {'N':>3}  " + "".join(f"{m + ' %':<19}" for m in shown)
          + "PRM−ORM pts [95 % CI]")
    for domain, result in results.items():
        for n in NS:
            diff = result["paired_points"]["prm-orm"][str(n)]
            print(f"{domain:<24} {result['questions']:>3} {n:>3}  "
                  + "".join(f"{cell(result['percent'][m][str(n)]):<19}" for m in shown)
                  + f"{diff['diff']:+5.1f} [{diff['low']:+5.1f} to {diff['high']:+5.1f}]")
    print("\nverdicts (paired bootstrap over questions):")
    for domain, result in results.items():
        print(f"  {domain}: " + "; ".join(result["verdict"] + [result["baseline_verdict"] or "no baseline verdict"]))


def _negative_weight(value: str) -> float | str:
    return value if value == "balanced" else float(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--feature-cache", type=Path, default=None,
                        help="folder that keeps the models and the text vectors between runs (default: a temporary "
                             "folder, everything encoded again)")
    parser.add_argument("--trials", type=int, default=400, help="random draws of N answers per question")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0, help="training split, best-of-N draws and bootstrap")
    parser.add_argument("--aggregation", default="training", choices=("training", *AGGREGATIONS),
                        help="the PRM's solution score: min or product of its step scores, or (the default) the one "
                             "with the higher flawed-solution AUROC on PRM800K's held-out tenth")
    parser.add_argument("--datasets", type=Path, default=None,
                        help="train on prm.jsonl and orm.jsonl (and counts.json) from this folder instead of the "
                             "PRM800K labels (reward_quality.py --write-datasets writes them)")
    parser.add_argument("--questions", type=int, default=0, help="the first K questions of each domain (0: all)")
    # the training recipe: reward_quality's options, with its defaults (its ``train`` reads them)
    parser.add_argument("--method", default="head", choices=("head", "finetune", "lora"))
    parser.add_argument("--base-model", default="default")
    parser.add_argument("--features", default="lexical", help="head: the step-feature recipe (default: the product's)")
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--negative-weight", type=_negative_weight, default="balanced",
                        help='"balanced" or a number')
    parser.add_argument("--steps", type=int, default=60, help="fine-tuning only: optimizer steps per model")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    import django

    django.setup()  # the grader, the pool parser and the demo's question choice live in Django apps (no queries)
    from rewards.training import load_reward_model

    started, load_before = time.time(), os.getloadavg()[0]
    rows = candidate_rows(math=False, questions_per_domain=args.questions) + candidate_rows(
        math=True, questions_per_domain=args.questions)
    with tempfile.TemporaryDirectory(prefix="domain-quality-") as tmp:
        work = Path(tmp)
        keep = args.feature_cache.resolve() if args.feature_cache else work
        keep.mkdir(parents=True, exist_ok=True)
        data = datasets_in(work, written=args.datasets)
        training = {}
        for kind in ("prm", "orm"):  # reward_quality's train keeps the vectors beside the model: keep/features
            training[kind] = train(kind, work / f"{kind}.jsonl", keep / kind, args, args.features)
            print(f"{kind}: {training[kind]['seconds']} s, held-out step AUROC "
                  f"{training[kind]['heldout_step_auroc']}, solution AUROC {training[kind]['heldout_solution_auroc']}",
                  flush=True)
        prm = load_reward_model(keep / "prm", device="cpu", batch_size=16)
        orm = load_reward_model(keep / "orm", device="cpu", batch_size=16)
        aggregation = (choose_aggregation(prm, work / "prm.jsonl") if args.aggregation == "training"
                       else {"aggregation": args.aggregation})
        print(f"aggregation: {aggregation}", flush=True)
        scoring_s = score(rows, prm, orm, aggregation["aggregation"])
        choices = fit_baselines(work / "prm.jsonl")  # the rules' directions, from the PRM's training rows
    results = {}
    domains = sorted({row["domain"] for row in rows if row["domain"] != MATH})
    for domain in domains:
        results[domain] = figures([r for r in rows if r["domain"] == domain], args.trials, args.seed, choices)
    results[NON_MATH] = figures([r for r in rows if r["domain"] != MATH], args.trials, args.seed, choices)
    results[MATH] = figures([r for r in rows if r["domain"] == MATH], args.trials, args.seed, choices)
    report(results)
    wall = time.time() - started
    print(f"\n{len(rows)} answers; training PRM {training['prm']['seconds']} s, ORM {training['orm']['seconds']} s, "
          f"scoring {scoring_s:.0f} s; wall {wall:.0f} s; load average {load_before:.1f} at start, "
          f"{os.getloadavg()[0]:.1f} at end on {os.cpu_count()} cores; peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB", flush=True)
    print(json.dumps({"bench": "domain_quality", "recipe": {k: str(v) for k, v in vars(args).items()},
                      "date": time.strftime("%Y-%m-%d"), "training_data": data, "aggregation": aggregation,
                      "training": {k: {x: v.get(x) for x in ("seconds", "heldout_step_auroc", "heldout_solution_auroc",
                                                             "threshold", "features")} for k, v in training.items()},
                      "ns": list(NS), "domains": results, "scoring_s": round(scoring_s, 1), "wall_s": round(wall, 1),
                      "load_average_start": round(load_before, 2), "load_average_end": round(os.getloadavg()[0], 2),
                      "cpus": os.cpu_count()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
