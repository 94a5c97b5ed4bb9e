"""The one place a step's rating becomes a training label (TRL stepwise rows, the consensus of label sources).

The campaign's label scale (``annotate.scales``) says which values are correct, wrong or neutral; every format
that maps a step's rating to a boolean calls ``step_label``.
"""
from __future__ import annotations

from annotate.scales import PM1, Scale


def step_label(rating: int | None, neutral: str, scale: Scale = PM1) -> bool | None:
    """A step's training label: positive or negative as the campaign's scale says (PRM800K: +1 / −1), a neutral
    value (PRM800K's 0) under the neutral policy (``positive``, ``negative``, ``exclude``); None means "leave the
    step out"."""
    positive = scale.says_correct(rating) if rating is not None else False
    if positive is None:
        return {"positive": True, "negative": False, "exclude": None}[neutral]
    return positive
