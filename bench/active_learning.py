"""Active learning, simulated on real labeled data: does ``convincing_wrong`` beat ``random`` selection?

    .venv/bin/python bench/active_learning.py                     # ProcessBench MATH, 3 generations
    .venv/bin/python bench/active_learning.py --generations 5 --batch 64 --max-steps 60

The "labeler" reveals ProcessBench's expert labels (index of the earliest wrong step; real model solutions
from 12 generators). Problems are split into a held-out test set and a candidate pool. Generation 0 is a
random seed set shared by both strategies; each later generation scores the unlabeled pool with that
strategy's latest PRM, selects ``--batch`` solutions with the strategy (``rewards.active``), reveals their
labels and retrains the CPU PRM (packaged MiniLM, ``rewards.training``) from the base model on everything
labeled so far. Revealed solutions become trl-stepwise rows the way PRM800K labels them: steps up to and
including the first wrong one (+1 … +1, −1), all steps +1 when there is none.

Held-out figures per generation (full test solutions scored by the PRM):
  step_auroc      P(correct) of each labeled step vs its label (steps up to the first error)
  solution_auroc  product score vs "no wrong step"
  answer_auroc    product score vs "final answer correct"
  first_error_f1  ProcessBench's F1: first step scored < 0.5 (or none) vs the true first error (or none)
  found_error     share of the batch that really had a wrong step (what labelers would report)

Run time: 7 retrainings of 24 steps plus scoring; about 5 min on 2 idle cores (~31 s per retraining
measured), 24 min measured on a shared, overloaded 2-core machine (load ~10).

One line per generation and strategy, then one JSON line with everything. ProcessBench is read from
/work/shared, never copied. At this scale (a few hundred labels, a 22M encoder, tens of optimizer steps)
differences of a few AUROC points are within seed noise: compare several ``--seed`` values before
concluding anything.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from rewards.active import ScoredCandidate, make_strategy  # noqa: E402
from rewards.training import load_reward_model, parse_config, run_training  # noqa: E402

SHARED = Path(os.environ.get("STEPLAB_SHARED", Path(__file__).resolve().parents[2] / "shared"))
PROCESSBENCH = SHARED / "data" / "processbench"


@dataclass(frozen=True)
class Item:
    """One ProcessBench solution: ``first_error`` is −1 when no step is wrong."""

    id: str
    problem: str
    steps: list[str]
    first_error: int
    answer_correct: bool

    def training_row(self) -> dict[str, Any]:
        cut = self.steps if self.first_error < 0 else self.steps[:self.first_error + 1]
        ratings = [1] * len(cut) if self.first_error < 0 else [1] * self.first_error + [-1]
        return {"prompt": self.problem, "completions": cut, "labels": [r > 0 for r in ratings],
                "ratings": ratings, "problem_id": _problem_key(self.problem), "split": "train"}


def _problem_key(text: str) -> str:
    return hashlib.sha256(text.strip().encode()).hexdigest()[:16]


def load_items(subsets: list[str]) -> list[Item]:
    items: list[Item] = []
    for subset in subsets:
        path = PROCESSBENCH / f"{subset}.json"
        if not path.is_file():
            sys.exit(f"error: {path} not found (set STEPLAB_SHARED to the shared folder)")
        for row in json.loads(path.read_text(encoding="utf-8")):
            items.append(Item(id=row["id"], problem=row["problem"], steps=[s.strip() or "." for s in row["steps"]],
                              first_error=int(row["label"]), answer_correct=bool(row["final_answer_correct"])))
    return items


def split_items(items: list[Item], test_size: int, pool_size: int, seed: int) -> tuple[list[Item], list[Item]]:
    """Held-out test and candidate pool, split by problem (seeded hash), so no problem is in both."""
    def rank(item: Item) -> str:
        return hashlib.sha256(f"{seed}:{_problem_key(item.problem)}".encode()).hexdigest()

    ordered = sorted(items, key=lambda i: (rank(i), i.id))
    test, pool, test_problems = [], [], set()
    for item in ordered:
        key = _problem_key(item.problem)
        if len(test) < test_size or key in test_problems:
            test.append(item)
            test_problems.add(key)
        elif len(pool) < pool_size:
            pool.append(item)
    return test, pool


def _auroc(scores: list[float], labels: list[int]) -> float | None:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(labels, scores)) if len(set(labels)) == 2 else None


def held_out(model: Any, test: list[Item]) -> dict[str, Any]:
    step_scores = model.score_steps_batch([(i.problem, i.steps) for i in test])
    step_x: list[float] = []
    step_y: list[int] = []
    sol_x: list[float] = []
    no_error: list[int] = []
    answer: list[int] = []
    hits_wrong = hits_right = n_wrong = n_right = 0
    for item, scores in zip(test, step_scores, strict=True):
        last = len(item.steps) if item.first_error < 0 else item.first_error + 1
        step_x += scores[:last]
        step_y += [1] * (last - 1) + [1 if item.first_error < 0 else 0]
        product = 1.0
        for s in scores:
            product *= s
        sol_x.append(product)
        no_error.append(int(item.first_error < 0))
        answer.append(int(item.answer_correct))
        predicted = next((k for k, s in enumerate(scores) if s < 0.5), -1)
        if item.first_error < 0:
            n_right += 1
            hits_right += predicted == -1
        else:
            n_wrong += 1
            hits_wrong += predicted == item.first_error
    acc_wrong = hits_wrong / n_wrong if n_wrong else 0.0
    acc_right = hits_right / n_right if n_right else 0.0
    f1 = 2 * acc_wrong * acc_right / (acc_wrong + acc_right) if acc_wrong + acc_right else 0.0
    return {"step_auroc": _auroc(step_x, step_y), "solution_auroc": _auroc(sol_x, no_error),
            "answer_auroc": _auroc(sol_x, answer), "first_error_f1": f1,
            "first_error_acc_wrong": acc_wrong, "no_error_acc_right": acc_right}


def train(labeled: list[Item], work: Path, name: str, args: argparse.Namespace) -> tuple[Path, float]:
    folder = work / name
    folder.mkdir(parents=True, exist_ok=True)
    dataset = folder / "train.jsonl"
    with dataset.open("w", encoding="utf-8") as handle:
        for item in labeled:
            handle.write(json.dumps(item.training_row(), ensure_ascii=False) + "\n")
    config = parse_config({
        "kind": "prm", "dataset": str(dataset), "base_model": "default", "output_dir": str(folder / "model"),
        "max_steps": args.max_steps, "batch_size": args.batch_size, "max_length": args.max_length,
        "learning_rate": args.learning_rate, "seed": args.seed, "logging_steps": 1000,
    })
    started = time.time()
    with contextlib.redirect_stdout(sys.stderr):  # Trainer's own log dicts; stdout keeps the figures
        run_training(config)
    return folder / "model", time.time() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--subsets", default="math", help="ProcessBench files, comma-separated (math,gsm8k)")
    parser.add_argument("--strategies", default="convincing_wrong,random")
    parser.add_argument("--generations", type=int, default=3, help="generations after the shared seed set")
    parser.add_argument("--seed-size", type=int, default=32, help="random labels of generation 0")
    parser.add_argument("--batch", type=int, default=32, help="solutions labeled per generation")
    parser.add_argument("--max-per-problem", type=int, default=1)
    parser.add_argument("--test-size", type=int, default=120)
    parser.add_argument("--pool-size", type=int, default=360)
    parser.add_argument("--max-steps", type=int, default=24, help="optimizer steps per retraining")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work-dir", type=Path, default=None, help="default: a temporary folder, removed")
    args = parser.parse_args(argv)
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    for name in strategies:
        make_strategy(name)  # fail on a bad name before any training

    started = time.time()
    items = load_items([s.strip() for s in args.subsets.split(",")])
    test, pool = split_items(items, args.test_size, args.pool_size, args.seed)
    by_id = {item.id: item for item in pool}
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="steplab-al-"))
    print(f"data: ProcessBench {args.subsets}: pool {len(pool)} solutions "
          f"({sum(not i.answer_correct for i in pool)} wrong answers, {sum(i.first_error >= 0 for i in pool)} "
          f"with a wrong step), held-out {len(test)}; seed set {args.seed_size}, batch {args.batch}, "
          f"{args.generations} generations, {args.max_steps} steps x {args.batch_size} per retraining", flush=True)

    def candidates(labeled: set[str], scores: dict[str, float] | None) -> list[ScoredCandidate]:
        return [ScoredCandidate(id=i.id, problem_id=_problem_key(i.problem),
                                score=None if scores is None else scores[i.id], is_correct=i.answer_correct,
                                already_labeled=i.id in labeled) for i in pool]

    def report(strategy: str, generation: int, labeled: set[str], selected: list[Item], model_dir: Path,
               train_s: float) -> dict[str, Any]:
        model = load_reward_model(model_dir, device="cpu", batch_size=16)
        figures = held_out(model, test)
        row = {"strategy": strategy, "generation": generation, "labeled": len(labeled), "selected": len(selected),
               "found_error": sum(i.first_error >= 0 for i in selected) / len(selected) if selected else None,
               "wrong_answer": sum(not i.answer_correct for i in selected) / len(selected) if selected else None,
               "train_s": round(train_s, 1), **figures}
        def fmt(v: Any) -> str:
            return "n/a" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)
        print(f"generation {generation} {strategy}: labeled={len(labeled)} selected={len(selected)} "
              f"found_error={fmt(row['found_error'])} step_auroc={fmt(row['step_auroc'])} "
              f"solution_auroc={fmt(row['solution_auroc'])} answer_auroc={fmt(row['answer_auroc'])} "
              f"first_error_f1={fmt(row['first_error_f1'])} train_s={row['train_s']}", flush=True)
        return row

    seed_pick = make_strategy("random", {"seed": args.seed}).select(candidates(set(), None), args.seed_size)
    seed_ids = {s.candidate.id for s in seed_pick}
    seed_items = [by_id[s.candidate.id] for s in seed_pick]
    seed_model, seed_s = train(seed_items, work, "gen0", args)
    results: dict[str, list[dict[str, Any]]] = {}
    shared = report("shared", 0, seed_ids, seed_items, seed_model, seed_s)
    for strategy_name in strategies:
        options: dict[str, Any] = {"seed": args.seed + 1} if strategy_name == "random" else {}
        if strategy_name in ("convincing_wrong", "mixed"):
            options["max_per_problem"] = args.max_per_problem
        strategy = make_strategy(strategy_name, options)
        labeled = set(seed_ids)
        model_dir = seed_model
        rows = [{**shared, "strategy": strategy_name}]
        for generation in range(1, args.generations + 1):
            scores = None
            if strategy.needs_scores:
                model = load_reward_model(model_dir, device="cpu", batch_size=16)
                unlabeled = [i for i in pool if i.id not in labeled]
                values = model.score_solutions([(i.problem, i.steps) for i in unlabeled])
                scores = {i.id: 0.0 for i in pool} | {i.id: v for i, v in zip(unlabeled, values, strict=True)}
                del model
            chosen = strategy.select(candidates(labeled, scores), args.batch)
            assert not any(s.candidate.id in labeled for s in chosen)
            selected = [by_id[s.candidate.id] for s in chosen]
            labeled |= {i.id for i in selected}
            if model_dir != seed_model:
                shutil.rmtree(model_dir.parent, ignore_errors=True)
            model_dir, train_s = train([i for i in pool if i.id in labeled], work, f"{strategy_name}-g{generation}",
                                       args)
            rows.append(report(strategy_name, generation, labeled, selected, model_dir, train_s))
        shutil.rmtree(model_dir.parent, ignore_errors=True)
        results[strategy_name] = rows
    if args.work_dir is None:
        shutil.rmtree(work, ignore_errors=True)

    final = {name: rows[-1] for name, rows in results.items()}
    summary: dict[str, Any] = {
        "bench": "active_learning", "data": f"processbench:{args.subsets}", "pool": len(pool), "test": len(test),
        "seed_size": args.seed_size, "batch": args.batch, "generations": args.generations,
        "max_steps": args.max_steps, "seed": args.seed, "results": results,
        "runtime_s": round(time.time() - started, 1),
    }
    if "convincing_wrong" in final and "random" in final:
        summary["convincing_wrong_minus_random"] = {
            key: (final["convincing_wrong"][key] - final["random"][key])
            if final["convincing_wrong"][key] is not None and final["random"][key] is not None else None
            for key in ("step_auroc", "solution_auroc", "answer_auroc", "first_error_f1", "found_error")}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
