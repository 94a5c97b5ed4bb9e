"""``metrics.json`` of a head trained with a fixed seed on a fixed dataset, byte for byte against the file the
trainer wrote before its split into ``rewards/training/heads/`` (the seconds it took, which no seed fixes, are
masked in both). New keys may be added to the golden files; an existing key's value must not change."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from rewards.training import parse_config, run_training

pytestmark = pytest.mark.training

GOLDEN = Path(__file__).parent / "golden"
#: the figures that measure wall-clock time: the only values a fixed seed does not fix
TIMED = re.compile(r'("(?:runtime_s|examples_per_s|features_s|calibration_s|tuning_s|tokens_per_s)": )-?[0-9.e+-]+')


def masked(text: str) -> str:
    return TIMED.sub(r'\1"<seconds>"', text)


@pytest.mark.parametrize("kind", ["prm", "orm"])
def test_head_metrics_match_the_golden_file(kind: str, tmp_path: Path) -> None:
    run_training(parse_config({"kind": kind, "dataset": str(GOLDEN / f"{kind}.jsonl"), "base_model": "default",
                               "method": "head", "negative_weight": "balanced", "seed": 0,
                               "output_dir": str(tmp_path / kind)}))
    written = masked((tmp_path / kind / "metrics.json").read_text(encoding="utf-8"))
    assert "<seconds>" in written  # the mask found the timed figures it is there for
    assert written == (GOLDEN / f"{kind}.metrics.json").read_text(encoding="utf-8")
