"""CLI ``python -m rewards.evaluation best-of-n``: the JSON document, bad input, and real AIME 2025 pools."""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from rewards.evaluation import METHODS, exact_best_of_n, load_scored_samples, pools_from_records
from rewards.evaluation.__main__ import main
from rewards.evaluation.pools import ScoredSamplesError

ROOT = Path(__file__).resolve().parents[2]


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def small_rows() -> list[dict]:
    return [
        {"problem": "p1", "answer": "a", "is_correct": False, "prm_score": 0.2, "orm_score": 0.8},
        {"problem": "p1", "answer": "b", "is_correct": True, "prm_score": 0.9, "orm_score": 0.1},
        {"problem": "p1", "answer": "a", "is_correct": False, "prm_score": 0.5, "orm_score": 0.3},
        {"problem": "p2", "given_answer": "7", "is_correct": True, "prm_score": 0.4, "orm_score": 0.4},
        {"problem": "p2", "given_answer": None, "is_correct": False, "prm_score": 0.95, "orm_score": 0.9},
    ]


def test_cli_writes_documented_json(tmp_path, capsys):
    samples = write_jsonl(tmp_path / "s.jsonl", small_rows())
    out = tmp_path / "deep" / "out.json"
    assert main(["best-of-n", "--samples", str(samples), "--ns", "1,3", "--trials", "50", "--seed", "3",
                 "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert list(doc["methods"]) == list(METHODS)
    assert doc["ns"] == [1, 3] and doc["trials"] == 50 and doc["pool_size"] == 3 and doc["problems"] == 2
    assert doc["seed"] == 3 and set(doc["exact"]) == {"pass", "prm", "orm"}
    for m in METHODS:
        assert set(doc["methods"][m]) == {"1", "3"}
        assert set(doc["methods"][m]["3"]) == {"mean", "std"}
    # N = pool size is deterministic: p1 -> prm right, orm wrong, majority "a" wrong; p2 -> only "7" answers
    assert doc["methods"]["prm"]["3"]["mean"] == 1.0
    assert doc["methods"]["orm"]["3"]["mean"] == 0.5
    assert doc["methods"]["majority"]["3"]["mean"] == 0.5
    assert doc["exact"]["pass"]["3"] == 1.0
    assert "prm" in capsys.readouterr().out


def test_cli_pool_size_and_paper_ns(tmp_path):
    samples = write_jsonl(tmp_path / "s.jsonl", small_rows())
    out = tmp_path / "o.json"
    assert main(["best-of-n", "--samples", str(samples), "--pool-size", "12", "--ns", "paper",
                 "--trials", "5", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["pool_size"] == 12 and doc["ns"] == [10]
    assert main(["best-of-n", "--samples", str(samples), "--pool-size", "4", "--trials", "5",
                 "--out", str(out)]) == 0
    assert json.loads(out.read_text())["ns"] == [1, 2, 4]


@pytest.mark.parametrize(
    "bad, line, needle",
    [
        ("{not json", 3, "invalid JSON"),
        ({"answer": "1", "is_correct": True, "prm_score": 0.1, "orm_score": 0.1}, 3, "field 'problem'"),
        ({"problem": "p", "answer": "1", "is_correct": "yes", "prm_score": 0.1}, 3, "field 'is_correct'"),
        ({"problem": "p", "answer": "1", "is_correct": True, "prm_score": "high"}, 3, "field 'prm_score'"),
        ({"problem": "p", "given_answer": ["1"], "is_correct": True}, 3, "field 'given_answer'"),
        ({"problem": "p", "answer": "1", "prm_score": 0.3}, 3, "field 'is_correct'"),
        ([1, 2], 3, "expected a JSON object"),
    ],
)
def test_cli_bad_line_names_file_line_and_field(tmp_path, capsys, bad, line, needle):
    rows = small_rows()[:2] + [""] + [bad]  # a blank line is skipped but still counted
    samples = write_jsonl(tmp_path / "bad.jsonl", rows)
    code = main(["best-of-n", "--samples", str(samples), "--out", str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{samples}:{line + 1}" in err and needle in err, err
    assert not (tmp_path / "o.json").exists()
    with pytest.raises(ScoredSamplesError) as info:
        load_scored_samples(samples)
    assert info.value.line == line + 1


def test_cli_rejects_bad_ns_and_missing_file(tmp_path, capsys):
    samples = write_jsonl(tmp_path / "s.jsonl", small_rows())
    assert main(["best-of-n", "--samples", str(samples), "--ns", "1,x", "--out", str(tmp_path / "o.json")]) == 2
    assert main(["best-of-n", "--samples", str(samples), "--ns", "5", "--out", str(tmp_path / "o.json")]) == 2
    assert main(["best-of-n", "--samples", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err
    assert "--ns" in err and "pool_size" in err and "nope.jsonl" in err


def test_answer_field_precedence():
    # eval.py: `answer` wins whenever the key is present, even when null
    pools = pools_from_records([
        {"problem": "p", "answer": None, "given_answer": "5", "is_correct": False, "prm_score": 1.0},
        {"problem": "p", "given_answer": "5", "is_correct": True, "prm_score": 0.0},
    ])
    assert pools[0].answers == (None, "5")


def test_real_aime_end_to_end(aime_jsonl, aime_samples, tmp_path):
    """Real pools (15 AIME 2025 problems x 64 samples) through the CLI as a subprocess."""
    out = tmp_path / "aime.json"
    proc = subprocess.run(
        [sys.executable, "-m", "rewards.evaluation", "best-of-n", "--samples", str(aime_jsonl),
         "--trials", "400", "--seed", "0", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["problems"] == 15 and doc["pool_size"] == 64 and doc["ns"] == [1, 2, 4, 8, 16, 32, 64]

    by_problem: dict[str, list[dict]] = {}
    for s in aime_samples:
        by_problem.setdefault(s["problem"], []).append(s)
    # pass@64: problems with at least one correct sample that has an answer
    solved = sum(any(s["is_correct"] and s["given_answer"] is not None for s in ss) for ss in by_problem.values())
    assert doc["methods"]["pass"]["64"] == {"mean": solved / 15, "std": 0.0}
    assert doc["exact"]["pass"]["64"] == pytest.approx(solved / 15)
    # pass@1 closed form: mean over problems of (correct samples / 64)
    p1 = sum(sum(s["is_correct"] and s["given_answer"] is not None for s in ss) / 64 for ss in by_problem.values()) / 15
    assert doc["exact"]["pass"]["1"] == pytest.approx(p1, abs=1e-12)
    # majority over the whole pool, by hand (ties between answers count fractionally)
    expected = 0.0
    for ss in by_problem.values():
        counts = Counter(s["given_answer"] for s in ss if s["given_answer"] is not None)
        top = max(counts.values())
        tied = [a for a, k in counts.items() if k == top]
        right = {s["given_answer"] for s in ss if s["is_correct"]}
        expected += sum(a in right for a in tied) / len(tied) / 15
    maj = doc["methods"]["majority"]["64"]
    assert maj["mean"] == pytest.approx(expected, abs=4 * max(maj["std"], 1e-9) / 20 + 1e-12)
    # top-score methods at N = 64 equal the closed form (ties aside, deterministic)
    for m in ("prm", "orm"):
        assert doc["methods"][m]["64"]["mean"] == pytest.approx(doc["exact"][m]["64"], abs=0.01)
        for n in map(str, doc["ns"]):
            got = doc["methods"][m][n]
            assert abs(got["mean"] - doc["exact"][m][n]) <= 4 * got["std"] / 20 + 1e-9, (m, n)
    # API and CLI agree on the exact figures
    ex = exact_best_of_n(load_scored_samples(aime_jsonl), ns=doc["ns"])
    assert ex == doc["exact"]


def test_importable_without_django():
    code = "import sys; sys.modules['django'] = None; import rewards.evaluation as e; print(e.best_of_n.__name__)"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "best_of_n", proc.stderr
