"""``metrics.json`` of a head trained with a fixed seed on a fixed dataset, against the file the trainer wrote
before its split into ``rewards/training/heads/`` (the seconds it took, which no seed fixes, are masked in both):
the same keys in the same order, the same strings, integers and booleans, and floats equal to 1e-6 relative (the
last digits of a BLAS sum differ between CPUs). New keys may be added to the golden files; an existing key's value
must not change."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from rewards.training import parse_config, run_training

pytestmark = pytest.mark.training

GOLDEN = Path(__file__).parent / "golden"
#: the figures that measure wall-clock time: the only values a fixed seed does not fix
TIMED = re.compile(r'("(?:runtime_s|examples_per_s|features_s|calibration_s|tuning_s|tokens_per_s)": )-?[0-9.e+-]+')


def masked(text: str) -> str:
    return TIMED.sub(r'\1"<seconds>"', text)


def differences(written: Any, golden: Any, where: str = "") -> list[str]:
    """Where ``written`` departs from ``golden``: a key added, lost or moved, a type or value changed."""
    if isinstance(golden, dict) and isinstance(written, dict):
        if list(written) != list(golden):
            return [f"{where or '/'}: keys {list(written)} != {list(golden)}"]
        return [d for key in golden for d in differences(written[key], golden[key], f"{where}/{key}")]
    if isinstance(golden, list) and isinstance(written, list):
        if len(written) != len(golden):
            return [f"{where}: {len(written)} items != {len(golden)}"]
        pairs = enumerate(zip(written, golden, strict=True))
        return [d for i, (w, g) in pairs for d in differences(w, g, f"{where}[{i}]")]
    if isinstance(golden, float) and isinstance(written, float):
        close = math.isclose(written, golden, rel_tol=1e-6, abs_tol=1e-12)
        return [] if close else [f"{where}: {written} != {golden}"]
    return [] if type(written) is type(golden) and written == golden else [f"{where}: {written!r} != {golden!r}"]


@pytest.mark.parametrize("kind", ["prm", "orm"])
def test_head_metrics_match_the_golden_file(kind: str, tmp_path: Path) -> None:
    run_training(parse_config({"kind": kind, "dataset": str(GOLDEN / f"{kind}.jsonl"), "base_model": "default",
                               "method": "head", "negative_weight": "balanced", "seed": 0,
                               "output_dir": str(tmp_path / kind)}))
    written = masked((tmp_path / kind / "metrics.json").read_text(encoding="utf-8"))
    assert "<seconds>" in written  # the mask found the timed figures it is there for
    golden = json.loads((GOLDEN / f"{kind}.metrics.json").read_text(encoding="utf-8"))
    assert not differences(json.loads(written), golden)


def test_the_comparison_finds_a_changed_value_a_moved_key_and_a_changed_type() -> None:
    golden = {"a": 0.5, "b": {"c": [1, "x"]}}
    assert not differences({"a": 0.5 * (1 + 1e-9), "b": {"c": [1, "x"]}}, golden)
    assert differences({"a": 0.5001, "b": {"c": [1, "x"]}}, golden) == ["/a: 0.5001 != 0.5"]
    assert differences({"b": {"c": [1, "x"]}, "a": 0.5}, golden)
    assert differences({"a": 0.5, "b": {"c": [1.0, "x"]}}, golden)
    assert differences({"a": 0.5, "b": {"c": [1]}}, golden)
