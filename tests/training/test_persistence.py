"""A head on disk: saved with its format version, loaded as it was fitted; a newer format is refused by name."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rewards.training.heads.models import LinearHead
from rewards.training.heads.persistence import HEAD_FILE, HEAD_FORMAT, load_head, save_head


def _head() -> LinearHead:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 3)).astype(np.float32)
    y = (x[:, 0] + 0.3 * rng.normal(size=60) > 0).astype(np.int64)
    head, _ = LinearHead.fit(x, y, negative_weight=1.0, iterations=100, seed=0)
    return head


def test_a_saved_head_carries_its_format_and_scores_as_fitted(tmp_path: Path) -> None:
    head = _head()
    save_head(head, tmp_path)
    with np.load(tmp_path / HEAD_FILE, allow_pickle=False) as saved:
        assert int(saved["head_format"]) == HEAD_FORMAT
    loaded = load_head(tmp_path)
    probe = np.array([[1.0, 0.0, 0.0], [-1.0, 0.5, 2.0]], np.float32)
    assert isinstance(loaded, LinearHead)
    np.testing.assert_array_equal(loaded.predict(probe), head.predict(probe))
    assert loaded.predict(probe)[0] > 0.5 > loaded.predict(probe)[1]


def test_a_head_from_newer_code_is_refused_naming_its_file(tmp_path: Path) -> None:
    save_head(_head(), tmp_path)
    with np.load(tmp_path / HEAD_FILE, allow_pickle=False) as saved:
        arrays = {name: saved[name] for name in saved.files}
    np.savez(tmp_path / HEAD_FILE, **{**arrays, "head_format": np.array(HEAD_FORMAT + 1)})
    with pytest.raises(ValueError, match=f"{HEAD_FILE}: head format {HEAD_FORMAT + 1} is newer"):
        load_head(tmp_path)
