"""Machine assistance for step labels on ProcessBench MATH: Monte-Carlo first errors, a PRM's, and consensus routing.

    .venv/bin/python bench/assist.py                           # CPU scale: SmolLM2-135M rollouts, a small CPU PRM
    python bench/assist.py --model DIR --device cuda --mc-solutions 200 --rollouts 16 --prm DIR   # on a GPU node

* MC: ``--mc-solutions`` ProcessBench MATH solutions whose problem is a MATH-500 problem (the ground truth the
  rollouts are graded against comes from ``shared/data/math/math500.jsonl``, joined by problem text), chosen by
  SHA-256 of their id, alternately erroneous and correct, among those of at most ``--mc-max-chars`` characters
  (on the CPU, every rollout reads its prefix again: 40 of the 112 such solutions are that short). They go
  through ``rewards.sampling.rollouts`` (the command the MC labeling job runs), in-process; the first error is the
  strategy's.
* PRM: ``--prm`` (a model folder ``rewards.training`` wrote), or without it a small PRM trained here with the
  project's trainer on the PRM800K phase-1 labels (the data ``bench/reward_quality.py`` builds). It scores
  ``--prm-solutions`` ProcessBench MATH solutions spread over the file, plus the MC ones; first error = first step
  scoring below ``--threshold``.
* Routing (no model): a solution goes to a human when its two machine sources disagree, otherwise the machines'
  first error is accepted. Simulated humans give the expert's first error with probability ``--human-agreement``,
  else another index drawn uniformly (no error included). A human pass rates the steps up to the first error it
  marks, or all of them. Two pairs of sources: MC vs PRM (the MC solutions), and, so the figure rests on more than
  a handful of solutions, PRM vs the final-answer check (``final_answer_correct``, what grading the answer gives):
  they agree when both say "no error" or both say "an error" (then the PRM's index is accepted).

The expert labels (``label``) are used only to score and to simulate humans. ProcessBench is read from
``../shared`` and never copied. Prints the figures, then one JSON line (last line).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
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

from reward_quality import SHARED, _django, build_datasets, train  # noqa: E402  (same PRM recipe and data)


def _hash(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:12], 16)


def _figures(labels: list[int], predictions: list[int]) -> dict[str, Any]:
    from rewards.evaluation.step_metrics import processbench_metrics

    figures = processbench_metrics(labels, predictions)
    exact = float(np.mean(np.array(labels) == np.array(predictions))) if labels else float("nan")
    return {"n": len(labels), "first_error_acc": exact,
            **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in figures.items()}}


def _chars(item: dict[str, Any]) -> int:
    return len(item["problem"]) + sum(len(step) for step in item["steps"])


def choose_mc(items: list[dict[str, Any]], answers: dict[str, str], count: int,
              max_chars: int | None) -> list[dict[str, Any]]:
    """``count`` solutions with a known ground truth (and at most ``max_chars`` of problem and steps: each rollout
    reads its prefix again), by hash of id, alternately erroneous and correct."""
    known = sorted((item for item in items if item["problem"].strip() in answers
                    and (max_chars is None or _chars(item) <= max_chars)), key=lambda i: _hash(i["id"]))
    wrong = [item for item in known if item["label"] != -1]
    right = [item for item in known if item["label"] == -1]
    chosen: list[dict[str, Any]] = []
    while len(chosen) < count and (wrong or right):
        for group in (wrong, right):
            if group and len(chosen) < count:
                chosen.append(group.pop(0))
    return chosen


def run_mc(chosen: list[dict[str, Any]], answers: dict[str, str], args: argparse.Namespace,
           work: Path) -> dict[str, dict[str, Any]]:
    from rewards.sampling import parse_rollout_config
    from rewards.sampling.rollouts import run_rollouts

    with (work / "solutions.jsonl").open("w", encoding="utf-8") as handle:
        for number, item in enumerate(chosen):
            handle.write(json.dumps({"solution_id": number, "problem": item["problem"],
                                     "answer": answers[item["problem"].strip()], "steps": item["steps"]}) + "\n")
    config = parse_rollout_config({
        "solutions": "solutions.jsonl", "output": "mc.jsonl", "model": args.model, "device": args.device,
        "rollouts": args.rollouts, "strategy": args.strategy, "max_new_tokens": args.max_new_tokens,
        "temperature": args.temperature, "seed": args.seed}, base_dir=work)
    summary = run_rollouts(config)
    rows = [json.loads(line) for line in config.output.read_text(encoding="utf-8").splitlines()]
    return {"summary": summary, "by_id": {chosen[row["solution_id"]]["id"]: row for row in rows}}


def load_prm(args: argparse.Namespace, work: Path) -> tuple[Any, dict[str, Any]]:
    from rewards.training import load_reward_model

    if args.prm:
        return load_reward_model(Path(args.prm), device=args.device, batch_size=16), {"folder": args.prm}
    _django()  # the exporter's path builder and the grader used to build the training rows
    data = build_datasets(work)
    args.negative_weight = "balanced"
    args.aggregation = "min"
    trained = train("prm", work / "prm.jsonl", work / "prm", args)
    print(f"prm: trained here, {args.steps} steps x {args.batch_size} x {args.max_length} tokens on "
          f"{data['prm_rows']} PRM800K phase-1 rows in {trained['seconds']} s, loss {trained['loss']}", flush=True)
    return load_reward_model(work / "prm", device=args.device, batch_size=16), {
        "trained_here": True, "steps": args.steps, "batch_size": args.batch_size, "max_length": args.max_length,
        "seconds": trained["seconds"], "loss": trained["loss"], "rows": data["prm_rows"]}


def simulate_humans(labels: np.ndarray, lengths: np.ndarray, agreement: float, rng: np.random.Generator) -> np.ndarray:
    """A labeler's first error per solution: the expert's with probability ``agreement``, else another index of
    {-1 (no error), 0..n-1} drawn uniformly."""
    marked = labels.copy()
    wrong = rng.random(len(labels)) >= agreement
    for i in np.flatnonzero(wrong):
        others = [k for k in range(-1, int(lengths[i])) if k != labels[i]]
        marked[i] = others[rng.integers(len(others))]
    return marked


def _ratings(first_errors: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Steps a human pass rates: up to and including the first error it marks, all of them when none."""
    return np.where(first_errors >= 0, first_errors + 1, lengths)


def routing(labels: list[int], lengths: list[int], machine: list[int], agree: list[bool], agreement: float,
            trials: int, seed: int) -> dict[str, Any]:
    """Routed labeling (humans only where the sources disagree) against all-human labeling, over ``trials``
    draws of the simulated humans (the same draws for both)."""
    y, n, m, ok = np.array(labels), np.array(lengths), np.array(machine), np.array(agree)
    rng = np.random.default_rng(seed)
    routed_acc, human_acc, saved = [], [], []
    for _ in range(trials):
        human = simulate_humans(y, n, agreement, rng)
        final = np.where(ok, m, human)
        routed_acc.append(float(np.mean(final == y)))
        human_acc.append(float(np.mean(human == y)))
        cost = _ratings(human, n)
        saved.append(1 - float(cost[~ok].sum()) / float(cost.sum()))
    accepted = ok.sum()
    return {
        "solutions": len(y), "routed_to_humans": round(float(np.mean(~ok)), 4),
        "step_ratings_saved": round(float(np.mean(saved)), 4),
        "routed_agreement": round(float(np.mean(routed_acc)), 4),
        "all_human_agreement": round(float(np.mean(human_acc)), 4),
        "accepted_machine_agreement": round(float(np.mean(m[ok] == y[ok])), 4) if accepted else None,
        "human_agreement": agreement, "trials": trials,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processbench", type=Path, default=SHARED / "processbench" / "math.json")
    parser.add_argument("--mc-solutions", type=int, default=6)
    parser.add_argument("--mc-max-chars", type=int, default=1200,
                        help="MC solutions: at most this many characters of problem and steps (0: any)")
    parser.add_argument("--rollouts", type=int, default=4)
    parser.add_argument("--strategy", default="binary_search", choices=("binary_search", "every_step"))
    parser.add_argument("--model", default="smollm2", help="'smollm2' or a local HF causal LM folder")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--prm", help="a PRM folder written by rewards.training (default: train a small one here)")
    parser.add_argument("--prm-solutions", type=int, default=200)
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--base-model", default="default", help="backbone of the PRM trained here")
    parser.add_argument("--method", default="head", choices=("head", "finetune", "lora"),
                        help="how the PRM trained here learns (reward_quality.py's trainer reads it)")
    parser.add_argument("--head-model", default=None, choices=("auto", "linear", "mlp", "linear+trees"))
    parser.add_argument("--steps", type=int, default=40, help="optimizer steps of the PRM trained here")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--human-agreement", type=float, default=0.9)
    parser.add_argument("--trials", type=int, default=200, help="draws of the simulated humans")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    import torch

    from rewards.evaluation.step_metrics import first_error_index

    torch.set_num_threads(args.threads)
    started = time.time()
    load_before = os.getloadavg()[0]
    items = json.loads(args.processbench.read_text(encoding="utf-8"))
    answers = {}
    for line in (SHARED / "math" / "math500.jsonl").open(encoding="utf-8"):
        row = json.loads(line)
        answers[row["problem"].strip()] = row["answer"]
    chosen = choose_mc(items, answers, args.mc_solutions, args.mc_max_chars or None)
    limit = min(args.prm_solutions, len(items))
    spread = [items[i * len(items) // limit] for i in range(limit)]  # the file lists erroneous solutions first
    by_id = {item["id"]: item for item in spread + chosen}

    with tempfile.TemporaryDirectory(prefix="assist-") as tmp:
        work = Path(tmp)
        mc_started = time.time()
        mc = run_mc(chosen, answers, args, work)
        mc_s = time.time() - mc_started
        print(f"mc: done in {mc_s:.0f} s ({mc['summary']['load_s']:.0f} s loading)", flush=True)
        prm_started = time.time()
        prm, prm_info = load_prm(args, work)
        scores = prm.score_steps_batch([(item["problem"], item["steps"]) for item in by_id.values()])
        prm_first = {item_id: first_error_index(s, args.threshold) for item_id, s in zip(by_id, scores, strict=True)}
        prm_s = time.time() - prm_started

    def label(item_id: str) -> int:
        return int(by_id[item_id]["label"])

    mc_ids = [item["id"] for item in chosen]
    mc_first = {i: (-1 if mc["by_id"][i]["first_error"] is None else mc["by_id"][i]["first_error"]) for i in mc_ids}
    spread_ids = [item["id"] for item in spread]
    mc_fig = _figures([label(i) for i in mc_ids], [mc_first[i] for i in mc_ids])
    prm_on_mc = _figures([label(i) for i in mc_ids], [prm_first[i] for i in mc_ids])
    prm_fig = _figures([label(i) for i in spread_ids], [prm_first[i] for i in spread_ids])
    lengths = {i: len(by_id[i]["steps"]) for i in by_id}
    mc_route = routing([label(i) for i in mc_ids], [lengths[i] for i in mc_ids], [mc_first[i] for i in mc_ids],
                       [mc_first[i] == prm_first[i] for i in mc_ids], args.human_agreement, args.trials, args.seed)
    answer_ok = {i: bool(by_id[i]["final_answer_correct"]) for i in spread_ids}
    check_route = routing([label(i) for i in spread_ids], [lengths[i] for i in spread_ids],
                          [prm_first[i] for i in spread_ids],
                          [(prm_first[i] == -1) == answer_ok[i] for i in spread_ids],
                          args.human_agreement, args.trials, args.seed)
    sweep = {str(a): routing([label(i) for i in spread_ids], [lengths[i] for i in spread_ids],
                             [prm_first[i] for i in spread_ids],
                             [(prm_first[i] == -1) == answer_ok[i] for i in spread_ids], a, args.trials, args.seed)
             for a in (0.7, 0.8, 0.95)}

    def f3(value: float | None) -> str:
        return "n/a" if value is None or (isinstance(value, float) and np.isnan(value)) else f"{value:.3f}"

    summary = mc["summary"]
    print(f"mc: solutions={mc_fig['n']} ({mc_fig['n_error']} erroneous, {mc_fig['n_correct']} correct) "
          f"rollouts={args.rollouts} strategy={args.strategy} model={args.model} max_new_tokens={args.max_new_tokens} "
          f"first_error_acc={f3(mc_fig['first_error_acc'])} erroneous={f3(mc_fig['error_acc'])} "
          f"correct={f3(mc_fig['correct_acc'])} f1={f3(mc_fig['f1'])}; {summary['steps_estimated']} prefixes "
          f"estimated, {summary['rollouts_used']} rollouts, {summary['completion_tokens']} tokens in "
          f"{summary['sample_s']:.0f} s")
    print(f"prm: solutions={prm_fig['n']} threshold={args.threshold} first_error_acc={f3(prm_fig['first_error_acc'])} "
          f"erroneous={f3(prm_fig['error_acc'])} correct={f3(prm_fig['correct_acc'])} f1={f3(prm_fig['f1'])}; "
          f"on the MC solutions first_error_acc={f3(prm_on_mc['first_error_acc'])}")
    for name, figures in (("routing mc-vs-prm", mc_route), ("routing prm-vs-answer-check", check_route)):
        print(f"{name}: solutions={figures['solutions']} to_humans={f3(figures['routed_to_humans'])} "
              f"ratings_saved={f3(figures['step_ratings_saved'])} agreement routed={f3(figures['routed_agreement'])} "
              f"all-human={f3(figures['all_human_agreement'])} (humans at {figures['human_agreement']}; accepted "
              f"machine labels right {f3(figures['accepted_machine_agreement'])})")
        if figures["routed_agreement"] < figures["all_human_agreement"]:
            print(f"  routed labeling agrees less with the experts than all-human labeling: "
                  f"{figures['all_human_agreement'] - figures['routed_agreement']:.3f} agreement for "
                  f"{figures['step_ratings_saved']:.3f} of the human step ratings")
    wall = time.time() - started
    print(f"wall {wall:.0f} s (mc {mc_s:.0f} s, prm {prm_s:.0f} s); load average {load_before:.1f} at start, "
          f"{os.getloadavg()[0]:.1f} at end on {os.cpu_count()} cores, {args.threads} torch thread(s); peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB", flush=True)
    print(json.dumps({
        "bench": "assist", "recipe": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "mc": {**mc_fig, "prefixes_estimated": summary["steps_estimated"], "rollouts_used": summary["rollouts_used"],
               "completion_tokens": summary["completion_tokens"], "sample_s": round(summary["sample_s"], 1),
               "load_s": round(summary["load_s"], 1),
               "first_errors": {i: [label(i), mc_first[i], prm_first[i]] for i in mc_ids}},
        "prm": {**prm_fig, "on_mc_solutions": prm_on_mc, "model": prm_info},
        "routing": {"mc_vs_prm": mc_route, "prm_vs_answer_check": check_route,
                    "prm_vs_answer_check_by_human_agreement": sweep},
        "wall_s": round(wall, 1), "load_average_start": round(load_before, 2), "cpus": os.cpu_count(),
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
