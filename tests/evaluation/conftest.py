"""Fixtures for rewards.evaluation (pure Python + NumPy, no Django).

Real data: /work/shared/data/bestofn/aime2025_I_k64.jsonl (15 AIME 2025 problems x 64 samples of a small
Qwen instruct model, with extracted answers and per-sample correctness; list fields may be stored as
strings of Python lists, hence ``ast.literal_eval``). It carries no verifier scores, so the conversion
to the scored-samples format uses deterministic stand-ins, documented here:

* ``prm_score`` = minus the response length in characters (prefer the shortest solution);
* ``orm_score`` = a uniform number in [0, 1) from the SHA-256 of the response text (a fixed
  pseudo-random choice);
* an empty extracted answer ("") means the sample reached no answer: ``answer`` is null.
"""
from __future__ import annotations

import ast
import hashlib
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

AIME_I = Path("/work/shared/data/bestofn/aime2025_I_k64.jsonl")


def _as_list(value):
    return ast.literal_eval(value) if isinstance(value, str) else list(value)


def aime_to_scored_samples(path: Path = AIME_I) -> list[dict]:
    samples = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            row = json.loads(line)
            responses = _as_list(row["generated_responses"])
            answers = _as_list(row["generated_answers"])
            correct = _as_list(row["answers_correctness"])
            assert len(responses) == len(answers) == len(correct)
            for text, answer, ok in zip(responses, answers, correct, strict=True):
                digest = hashlib.sha256(text.encode("utf-8")).digest()
                samples.append({
                    "problem": row["question"],
                    "given_answer": answer if str(answer).strip() else None,
                    "is_correct": bool(ok),
                    "prm_score": -float(len(text)),
                    "orm_score": int.from_bytes(digest[:8], "big") / 2**64,
                })
    return samples


@pytest.fixture(scope="session")
def aime_samples() -> list[dict]:
    if not AIME_I.exists():
        pytest.skip(f"{AIME_I} not available")
    return aime_to_scored_samples()


@pytest.fixture(scope="session")
def aime_jsonl(tmp_path_factory, aime_samples) -> Path:
    path = tmp_path_factory.mktemp("aime") / "scored-aime2025-I.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for s in aime_samples:
            fh.write(json.dumps(s) + "\n")
    return path
