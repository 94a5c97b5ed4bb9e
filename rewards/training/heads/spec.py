"""What a head reads and what it is: the job's ``head_features`` and ``head_model`` strings, parsed once."""
from __future__ import annotations

import enum
from dataclasses import dataclass


class Recipe(enum.Enum):
    """The columns a step (PRM) or a solution (ORM) is scored from; the value is the job file's string."""

    LEXICAL = "lexical"  # position, text features, number provenance and word n-grams; no backbone
    LEXICAL_COSINES = "lexical+cosines"  # the same plus the steps' cosines from the backbone's vectors
    CONTEXT_TEXT = "context+text"  # vectors of the step, the step before it and the problem, plus text features
    CONTEXT = "context"  # those vectors alone
    STEP = "step"  # the step's and the problem's vectors

    @property
    def lexical(self) -> bool:
        """A linear head over words and dense columns (``LexicalHead``)."""
        return self in (Recipe.LEXICAL, Recipe.LEXICAL_COSINES)

    @property
    def with_text(self) -> bool:
        """A vector recipe that adds the steps' text features."""
        return self is Recipe.CONTEXT_TEXT

    @property
    def reads_vectors(self) -> bool:
        """Whether its columns come from the backbone's cached vectors (every recipe but ``lexical``)."""
        return self is not Recipe.LEXICAL


class HeadModel(enum.Enum):
    """The classifier over a recipe's columns."""

    LINEAR = "linear"
    LINEAR_TREES = "linear+trees"  # the lexical regression with boosted trees beside it
    MLP = "mlp"


@dataclass(frozen=True)
class HeadSpec:
    recipe: Recipe
    model: HeadModel
    # the settings ``tuning`` chooses on the training problems; None: the model's default
    regularisation: float | None = None  # the regression's inverse L2 strength
    min_df: int | None = None  # texts that must hold a word n-gram for the lexical regression to read it
    tree_weight: float | None = None  # the boosted trees' share of the blended log-odds (0: no trees)
    tree_leaves: int | None = None  # leaves per boosted tree
    mlp_hidden: int | None = None  # the MLP's hidden width
    mlp_dropout: float | None = None  # the MLP's dropout after its hidden layer


def head_spec(features: str, model: str = "auto") -> HeadSpec:
    """The spec of a job's (or a saved head's) strings; ``auto``: trees beside a lexical recipe, else linear.
    Raises ``ValueError`` naming the string that is not a recipe or a model, or a pair that does not fit."""
    recipe = Recipe(features)
    chosen = (HeadModel.LINEAR_TREES if recipe.lexical else HeadModel.LINEAR) if model == "auto" else HeadModel(model)
    if recipe.lexical and chosen is HeadModel.MLP:
        raise ValueError(f"'mlp' reads vectors only; head_features {features!r} is a linear head over words "
                         f"(choose head_features 'context' or 'context+text' for the MLP)")
    if not recipe.lexical and chosen is HeadModel.LINEAR_TREES:
        raise ValueError(f"'linear+trees' reads words; head_features {features!r} are vectors "
                         f"(choose head_features 'lexical' or 'lexical+cosines')")
    return HeadSpec(recipe, chosen)


def resolved_method(method: str) -> str:
    """``auto``: the head on a CPU, fine-tuning where CUDA is present."""
    if method != "auto":
        return method
    import torch

    return "finetune" if torch.cuda.is_available() else "head"
