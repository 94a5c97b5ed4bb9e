"""Outcome graders, one module each, behind one registry: a campaign names its grader (and its plain-data
config) and everything that grades — importers, pools, the workspace, exports, the dashboard — asks for it here.

Plain Python: Django-free code (the sampler, the training node) may import it.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Grader, GraderConfigError
from .exact import ExactGrader
from .human import HumanGrader
from .math import MathGrader
from .multiple_choice import MultipleChoiceGrader
from .regex import RegexGrader

GRADERS: dict[str, type[Grader]] = {cls.name: cls for cls in (
    MathGrader, MultipleChoiceGrader, ExactGrader, RegexGrader, HumanGrader)}
DEFAULT_GRADER = MathGrader.name
GRADER_CHOICES = [(name, cls.label) for name, cls in GRADERS.items()]


def get_grader(name: str = DEFAULT_GRADER, config: Mapping[str, Any] | None = None) -> Grader:
    """The grader called ``name`` configured by ``config``; GraderConfigError for an unknown name or bad config."""
    cls = GRADERS.get(name)
    if cls is None:
        raise GraderConfigError("grader", f"unknown grader {name!r}; expected one of {', '.join(GRADERS)}")
    return cls(config)


def graded_by_people(name: str) -> bool:
    """Whether the grader called ``name`` has no ground truth (the labelers' rating of the final answer is the
    outcome). Read from the class, not a configured grader: a page needs no config, and a stored config the pattern
    engine now refuses must not break the labeling pages."""
    cls = GRADERS.get(name)
    return cls is not None and not cls.needs_ground_truth


__all__ = ["DEFAULT_GRADER", "GRADERS", "GRADER_CHOICES", "Grader", "GraderConfigError", "get_grader",
           "graded_by_people"]
