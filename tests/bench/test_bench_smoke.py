"""Every bench script runs at a tiny size through its own flags and ends in its JSON line with the keys its readers
(docs/benchmarks.md, the reports) rely on, so a bench cannot break unnoticed when a function it calls changes.

The figures of a tiny run mean nothing and are not checked; that the run finishes and says what it measured is.
The reward-quality benches (``reward_quality``, ``domain_quality``, ``assist``), ``llm_judge`` and ``comparison``
have smoke tests of their own beside this file."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.training_files import tiny_training_files

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
SHARED = Path(os.environ.get("STEPLAB_SHARED", "/work/shared")) / "data"
PG = "postgres://postgres@127.0.0.1:5432"
#: smoke-tested elsewhere, or a module the benches share rather than a bench
ELSEWHERE = {"reward_quality", "domain_quality", "assist", "llm_judge", "comparison", "serving"}


#: the suite's own database name, so two suites on one server (two checkouts) never share a bench's database
SUITE = os.environ.get("DATABASE_URL", "").rsplit("/", 1)[-1].split("?")[0] or "steplab"


def _database(name: str) -> str:
    """A bench database of the smoke run's own (the bench makes it afresh), on the suite's PostgreSQL server."""
    return f"{PG}/{SUITE}_bench_smoke_{name}"


#: (script, arguments, the keys its JSON line has); {tmp} is the test's temporary folder
BENCHES = [
    pytest.param("best_of_n", ["--problems", "20", "--pool-size", "40", "--trials", "10", "--loop-trials", "2"],
                 {"speedup", "cells_outside_tolerance", "trials", "problems", "ns"}, id="best_of_n"),
    pytest.param("graders", ["--responses", "{tmp}/responses.jsonl"],
                 {"responses", "agreement_pct", "accuracy_grader_pct", "target_met"}, id="graders"),
    pytest.param("regex_budget", ["--chars", "2000", "--victim", "8"],
                 {"worst_pattern_s", "worst_answer_s", "pattern_target_met", "answer_target_met"}, id="regex_budget"),
    pytest.param("import_export", ["--database", "sqlite", "--solutions", "200", "--steps", "3"],
                 {"solutions", "import_s", "export_s", "rows_exported_match"}, id="import_export"),
    pytest.param("dashboard", ["--solutions", "200", "--steps", "3", "--renders", "2",
                               "--database-url", _database("dashboard")],
                 {"solutions", "ratings", "dashboard", "dashboard_uncached", "pass"}, id="dashboard"),
    pytest.param("export", ["--solutions", "200", "--steps", "3", "--download-gb", "0.001",
                            "--database-url", _database("export")],
                 {"step_ratings", "export_s", "export_cpu_s", "files", "download_ok", "targets_met"}, id="export"),
    pytest.param("device_pack", ["--out", "{tmp}/device", "--steps", "1", "--datasets", "{tmp}/ds"],
                 {"bench", "packed_bytes", "tree_bytes", "fits", "command"}, id="device_pack"),
    pytest.param("demo_mmlu", [], {"demo_mmlu_s", "headroom_pool_s", "total_s", "target_met"}, id="demo_mmlu"),
    pytest.param("labeling_load", ["--solutions", "200", "--steps", "3", "--labelers", "2", "--per-labeler", "1",
                                   "--workers", "1", "--database-url", _database("labeling_load")],
                 {"labelers", "solutions_labeled", "errors", "lost_ratings", "duplicated_ratings", "targets_met"},
                 id="labeling_load"),
    pytest.param("whole_solution", ["--solutions", "100", "--steps", "3", "--labelers", "2", "--per-labeler", "2",
                                    "--workers", "1", "--database-url", _database("whole_solution")],
                 {"whole_solutions", "whole_median_ms", "errors", "solutions_with_wrong_ratings", "target_met"},
                 id="whole_solution"),
    pytest.param("outbound", ["--hooks", "1", "--deadline", "1"],
                 {"hooks", "held_s_max", "import_alone_s", "import_behind_webhooks_s", "held_ok"}, id="outbound",
                 marks=pytest.mark.worker),
    pytest.param("training", ["--steps", "2", "--warmup", "0", "--batch-size", "2", "--max-length", "64"],
                 {"device", "steps", "examples_per_s", "tokens_per_s", "train_runtime_s"}, id="training",
                 marks=pytest.mark.training),
    pytest.param("answer_forms", ["--datasets", "{tmp}/ds", "--no-orm", "--processbench-limit", "40"],
                 {"bench", "training", "processbench"}, id="answer_forms", marks=pytest.mark.training),
    pytest.param("active_learning", ["--generations", "1", "--seed-size", "8", "--batch", "4", "--test-size", "12",
                                     "--pool-size", "24", "--max-steps", "2", "--batch-size", "4", "--max-length", "64",
                                     "--strategies", "random"],
                 {"bench", "pool", "test", "generations", "results"}, id="active_learning", marks=pytest.mark.training),
    pytest.param("soak", ["--users", "2", "--duration", "5", "--solutions", "40", "--steps", "3", "--gunicorn-workers",
                          "1", "--database-url", _database("soak"), "--redis-url", "redis://127.0.0.1:6379/12"],
                 {"users", "seconds", "requests", "errors", "missing", "duplicates"}, id="soak",
                 marks=pytest.mark.worker),
]


def _run(script: str, args: list[str], tmp: Path) -> dict[str, object]:
    command = [sys.executable, str(BENCH / f"{script}.py"), *(arg.format(tmp=tmp) for arg in args)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    figures = json.loads(last)
    assert isinstance(figures, dict), last
    return figures


@pytest.mark.parametrize(("script", "args", "keys"), BENCHES)
def test_a_tiny_run_ends_in_its_json_line(script: str, args: list[str], keys: set[str], tmp_path: Path) -> None:
    if script == "graders":
        with (SHARED / "mmlu-pro" / "responses.jsonl").open(encoding="utf-8") as responses:
            (tmp_path / "responses.jsonl").write_text("".join(next(responses) for _ in range(300)), encoding="utf-8")
    if script in ("device_pack", "answer_forms"):
        tiny_training_files(tmp_path / "ds")
    figures = _run(script, args, tmp_path)
    assert keys <= figures.keys(), f"{script}: missing {sorted(keys - figures.keys())} in {sorted(figures)}"


def test_every_bench_script_has_a_smoke_run() -> None:
    scripts = {path.stem for path in BENCH.glob("*.py")}
    smoked = {param.values[0] for param in BENCHES}
    assert scripts - ELSEWHERE - smoked == set(), "a bench script without a smoke run here"
    assert not ELSEWHERE - scripts, "a name in ELSEWHERE that is no bench file"
