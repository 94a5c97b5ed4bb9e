"""The columns a head reads: per step (PRM) or per solution (ORM), from the texts and, for the recipes that read
vectors, from the frozen backbone's cached vectors; and the examples a fit learns from."""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ..data import IGNORE_INDEX, OrmRow, PrmRow, prefix_digests
from ..features import FeatureCache
from ..symbolic import symbolic_features
from ..textfeatures import NAMES as TEXT_NAMES
from ..textfeatures import provenance_features, steps_text_features
from .spec import Recipe

REPEAT_COSINE = 0.97  # a step this close to an earlier one repeats it
#: the lexical recipes' text-feature set, saved with a lexical head and read back when it scores (a head saved
#: without one read set 1): 1, the text features and number provenance; 2, those and the symbolic columns
#: (``symbolic.NAMES``: equalities over bound variables, numbers from nowhere)
TEXT_FEATURES = 2
LEGACY_TEXT_FEATURES = 1


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray((a * b).sum(axis=-1, keepdims=True), dtype=np.float32)  # the vectors are unit length


def _failed_before(text: np.ndarray) -> np.ndarray:
    """Per step, from its rows of text features: 1 where an earlier step already failed the arithmetic check."""
    wrong = text[:, TEXT_NAMES.index("any_wrong")]
    return np.concatenate([[0.0], np.maximum.accumulate(wrong)[:-1]]).astype(np.float32)


def _vectors(cache: FeatureCache | None, recipe: Recipe) -> FeatureCache:
    if cache is None:
        raise ValueError(f"head_features {recipe.value!r} reads the backbone's vectors: a feature cache is needed")
    return cache


def _cosine_columns(cache: FeatureCache, prompt: str, steps: Sequence[str]) -> np.ndarray:
    """``lexical+cosines``: each step's cosine to the problem, to the step before it and to the closest earlier
    step, and whether it repeats one."""
    problem = cache.get(prompt)
    current = np.stack([cache.get(s) for s in steps])
    similarity = current @ current.T
    closest = np.array([similarity[i, :i].max() if i else 0.0 for i in range(len(steps))], dtype=np.float32)
    previous = np.vstack([np.zeros_like(problem)[None, :], current[:-1]])
    return np.column_stack([current @ problem, _cosine(current, previous)[:, 0], closest,
                            (closest > REPEAT_COSINE).astype(np.float32)])


def _step_scalars(cache: FeatureCache | None, prompt: str, steps: Sequence[str], recipe: Recipe,
                  text_features: int) -> np.ndarray:
    """The lexical recipes' dense columns of each step: its position, (``lexical+cosines``) its cosines, its
    text features, whether an earlier step failed the arithmetic check, where its numbers come from
    (``textfeatures``) and, from set 2 on, the symbolic reading of its equalities and numbers (``symbolic``)."""
    if text_features not in (LEGACY_TEXT_FEATURES, TEXT_FEATURES):
        raise ValueError(f"text feature set {text_features} is not one this code builds "
                         f"({LEGACY_TEXT_FEATURES}, {TEXT_FEATURES})")
    text = steps_text_features(prompt, steps)
    position = np.log1p(np.arange(len(steps), dtype=np.float32))[:, None]
    cosines = [_cosine_columns(_vectors(cache, recipe), prompt, steps)] if recipe.reads_vectors else []
    symbolic = [symbolic_features(prompt, steps)] if text_features >= 2 else []
    return np.hstack([position, *cosines, text, _failed_before(text)[:, None],
                      provenance_features(prompt, steps), *symbolic]).astype(np.float32)


def step_features(cache: FeatureCache | None, prompt: str, steps: Sequence[str], recipe: Recipe, *,
                  text_features: int = TEXT_FEATURES) -> np.ndarray:
    """One row per step: what the PRM head reads. The lexical recipes (``lexical`` needs no ``cache``): the
    step's scalar columns and its previous step's (the vectors themselves are left out: they fit the training
    problems' topics, not the steps' correctness); its words are the head's other input (``LexicalHead``).
    ``context+text`` adds the step's own text features and whether an earlier step already failed the
    arithmetic check. The position is the step's index, never its share of the solution (a labeled row that
    ends at a rated alternative would teach "the last step is wrong", which no unlabeled solution tells).
    ``text_features``: the lexical recipes' set (``TEXT_FEATURES``; a saved head's own when it scores)."""
    if recipe.lexical:
        scalars = _step_scalars(cache, prompt, steps, recipe, text_features)
        return np.hstack([scalars, np.vstack([np.zeros_like(scalars[:1]), scalars[:-1]])])
    cache = _vectors(cache, recipe)
    problem = cache.get(prompt)[None, :]
    current = np.stack([cache.get(s) for s in steps])
    position = np.log1p(np.arange(len(steps), dtype=np.float32))[:, None]
    if recipe is Recipe.STEP:
        return np.hstack([current, problem.repeat(len(steps), 0), current * problem, position])
    previous = np.vstack([np.zeros_like(problem), current[:-1]])
    columns = [current, previous, problem.repeat(len(steps), 0), current * problem, current * previous,
               position, _cosine(current, problem), _cosine(current, previous)]
    if recipe.with_text:
        text = steps_text_features(prompt, steps)
        columns += [text, _failed_before(text)[:, None]]
    return np.hstack(columns)


def solution_features(cache: FeatureCache | None, prompt: str, steps: Sequence[str], recipe: Recipe, *,
                      text_features: int = TEXT_FEATURES) -> np.ndarray:
    """One row per solution: what the ORM head reads. ``context+text``: the steps' text features too (their
    mean, and the most wrong equalities in one step), the same evidence the PRM gets; the lexical recipes: the
    mean and maximum of the steps' scalar columns and the number of steps (the solution's words are the head's
    other input)."""
    if recipe.lexical:
        scalars = _step_scalars(cache, prompt, steps, recipe, text_features)
        return np.concatenate([scalars.mean(axis=0), scalars.max(axis=0),
                               np.log1p(np.array([len(steps)], dtype=np.float32))])
    cache = _vectors(cache, recipe)
    problem = cache.get(prompt)
    vectors = np.stack([cache.get(s) for s in steps])
    last = vectors[-1]
    columns = [vectors.mean(axis=0), last, problem, last * problem,
               np.log1p(np.array([len(steps)], dtype=np.float32))]
    if recipe.with_text:
        text = steps_text_features(prompt, steps)
        columns += [text.mean(axis=0), text.max(axis=0)]
    return np.concatenate(columns)


def orm_steps(completion: str) -> list[str]:
    """An outcome row's solution as the exporter wrote it (steps joined by newlines), split back into steps so
    that an ORM reads the same cached step vectors as the PRM."""
    return [line for line in completion.split("\n") if line.strip()] or [completion]


def texts_of(rows: Sequence[PrmRow] | Sequence[OrmRow]) -> list[str]:
    """Every text the rows' columns are built from: each problem and each step."""
    texts: list[str] = []
    for row in rows:
        texts.append(row.prompt)
        texts.extend(row.steps if isinstance(row, PrmRow) else orm_steps(row.completion))
    return texts


def problem_of(row: PrmRow | OrmRow) -> str:
    return row.problem_id or row.prompt


class Examples(NamedTuple):
    """A head's training input: one row of features, text, label, problem and context per labeled step or
    solution (the context: what the example was written after, the problem and a PRM step's earlier steps)."""

    x: np.ndarray
    texts: list[str]
    y: np.ndarray
    groups: np.ndarray
    contexts: list[str]

    def subset(self, keep: np.ndarray) -> Examples:
        index = np.flatnonzero(keep)
        return Examples(self.x[index], [self.texts[i] for i in index], self.y[index], self.groups[index],
                        [self.contexts[i] for i in index])


def prm_examples(rows: Sequence[PrmRow], row_features: Sequence[np.ndarray]) -> Examples:
    """Every labeled step (neutral-excluded and repeated ones left out); its text is the step's.
    ``row_features``: each row's ``step_features``."""
    xs: list[np.ndarray] = []
    texts: list[str] = []
    ys: list[int] = []
    groups: list[str] = []
    contexts: list[str] = []
    for row, features in zip(rows, row_features, strict=True):
        keep = [i for i, label in enumerate(row.labels) if label != IGNORE_INDEX]
        if keep:
            xs.append(features[keep])
            texts.extend(row.steps[i] for i in keep)
            ys.extend(row.labels[i] for i in keep)
            groups.extend([problem_of(row)] * len(keep))
            before = prefix_digests(row.prompt, row.steps)  # entry i: the problem and the steps before step i
            contexts.extend(before[i] for i in keep)
    width = row_features[0].shape[1] if len(row_features) else 0
    return Examples((np.vstack(xs) if xs else np.zeros((0, width), np.float32)), texts,
                    np.array(ys, dtype=np.int64), np.array(groups, dtype=object), contexts)


def orm_examples(cache: FeatureCache | None, rows: Sequence[OrmRow], recipe: Recipe) -> Examples:
    """Every solution; its text is the whole solution, its context the problem."""
    if not rows:
        return Examples(np.zeros((0, 0), np.float32), [], np.zeros(0, np.int64), np.zeros(0, dtype=object), [])
    problems = [problem_of(r) for r in rows]
    return Examples(np.stack([solution_features(cache, r.prompt, orm_steps(r.completion), recipe) for r in rows]),
                    [r.completion for r in rows], np.array([r.label for r in rows], dtype=np.int64),
                    np.array(problems, dtype=object), problems)
