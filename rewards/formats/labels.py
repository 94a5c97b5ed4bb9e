"""The one place a step's rating becomes a training label (TRL stepwise rows, the consensus of label sources).

A campaign's label scale plugs in here: every format that maps a step's rating to a boolean calls ``step_label``.
"""
from __future__ import annotations


def step_label(rating: int | None, neutral: str) -> bool | None:
    """The step's label under the neutral policy (``positive``: 0 is correct, ``negative``: 0 is wrong,
    ``exclude``: a neutral step is left out); None means "leave the step out"."""
    if rating == 0:
        return {"positive": True, "negative": False, "exclude": None}[neutral]
    return rating == 1
