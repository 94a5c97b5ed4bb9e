"""The ``head`` method: a small classifier trained on every label, over a step's own columns or cached vectors.

Full fine-tuning reads every token of every labeled path once per epoch through the whole encoder: on two CPU
cores a budget of minutes reaches a few hundred of a dataset version's tens of thousands of paths. Here a
logistic regression learns from all the labels in seconds, over columns built from the texts themselves or (the
vector recipes) from a frozen backbone's vectors, each distinct text encoded once (``features.FeatureCache``).
The default recipe (``lexical``) reads a step's words and the dense columns of it and of the step
before it (position, arithmetic and number checks); the ORM reads the same evidence for a whole solution. It
needs no backbone at all: measured, the backbone's cosines (``lexical+cosines``, the former default) added
nothing but the encoding time. The recipes that read vectors share one cache between PRM and ORM, so both see
the same backbone. Where examples share their context (rated alternatives after one prefix; solutions to one
problem), the fit also learns from their contrast: which of two siblings the labelers rated better.

The head is saved as plain arrays (``head.npz``: standardisation and weights), no pickle; the backbone is not
copied, the spec names it.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .config import TrainConfig, default_model_path
from .data import (
    IGNORE_INDEX,
    OrmRow,
    PrmRow,
    prefix_digests,
    read_dataset,
    split_rows,
    with_neutral_answers,
    without_problems,
)
from .features import FeatureCache
from .textfeatures import NAMES as TEXT_NAMES
from .textfeatures import provenance_features, steps_text_features

HEAD_FILE = "head.npz"
TREES_FILE = "trees.txt"  # the lexical head's boosted trees, in LightGBM's own text format
LINEAR_AND_TREES = "linear+trees"  # the head model that adds them
#: the recipe that reads no backbone vectors: a job or a scoring with it encodes nothing
VECTOR_FREE = "lexical"
#: iterations of the head's optimizer when the job gives no ``max_steps`` (L-BFGS converges well before)
DEFAULT_ITERATIONS = 300
REGULARISATION = 0.5  # inverse L2 strength of the logistic regression, measured in docs/training-methods.md
# the MLP head (docs/training-methods.md gives the measurements behind these)
MLP_HIDDEN = 256
MLP_DROPOUT = 0.3
MLP_INPUT_DROPOUT = 0.1
MLP_LEARNING_RATE = 1e-3
MLP_WEIGHT_DECAY = 1e-2
MLP_BATCH = 512
MLP_MAX_EPOCHS = 40
MLP_PATIENCE = 3  # epochs without a better held-aside loss before stopping
# the lexical head (docs/training-methods.md: measured on the demo's held-out split and ProcessBench)
LEXICAL_REGULARISATION = 0.3
LEXICAL_MIN_DF = 3  # a word n-gram is a column once this many training texts hold it ...
LEXICAL_MIN_DF_TEXTS = 1000  # ... in a dataset of at least this many texts (a smaller one keeps every n-gram)
LEXICAL_MAX_NGRAMS = 300_000
# words and numbers, the operators a step's arithmetic uses, and the punctuation that tells a question ("?") from
# a claim, a definition (":") or a formula ("$")
LEXICAL_TOKENS = r"(?u)\b\w+\b|[=+\-*/^\\?!.,:;()<>$]"
LEGACY_LEXICAL_TOKENS = r"(?u)\b\w+\b|[=+\-*/^\\]"  # a head saved before punctuation and text marks
LEGACY_LEXICAL_RECIPE = "lexical+cosines"  # a head saved before the default stopped reading the backbone
# The boosted trees beside the lexical head's logistic regression (``linear+trees``): LightGBM over the dense
# columns and binary n-gram columns, its log-odds averaged with the regression's. The trees find what one weight
# per column cannot ("the answer is" late in a solution vs early); alone they score as the regression does, blended
# they add +0.008 to the cross-validation (docs/training-methods.md: every value here was chosen there).
TREE_ROUNDS = 200
TREE_LEARNING_RATE = 0.05
TREE_LEAVES = 31
TREE_MIN_CHILD = 40  # examples per leaf at least
TREE_ROW_SHARE = 0.8  # each round fits on this share of the examples ...
TREE_COLUMN_SHARE = 0.5  # ... and each tree reads this share of the columns
# an n-gram is a tree column once this many training texts hold it (the value the cross-validation ran with; one
# held by fewer than TREE_MIN_CHILD texts can never be split on anyway)
TREE_MIN_DF = 20
# below this many examples the trees grow on one thread: waking a second one each round costs more than it saves
# (measured on 2 cores: 4,294 examples 0.7 s on one thread, 2.8 s on two; 41,669 examples 14.2 s, 12.0 s on two)
TREE_THREADED_EXAMPLES = 20_000
TREE_L2 = 1.0  # L2 penalty on the leaves' values
TREE_WEIGHT = 0.5  # the trees' share of the blended log-odds
# Words put around each text before it is split into n-grams, so that a bigram says how a step opens ("xxstart
# So") and how it ends ("? xxend"): a planning question is rarely wrong, a concluding claim often is.
TEXT_START, TEXT_END = "xxstart", "xxend"
# Sibling contrasts: examples that share their context (a PRM step: the problem and every step before it, as the
# labelers' rated alternatives do; an ORM solution: the problem) with opposite labels also enter the fit as
# pairs, "the better one scores higher", at this weight against the examples' own log loss.
SIBLING_WEIGHT = 0.3
SIBLING_PAIRS_PER_CONTEXT = 32  # a seeded sample beyond this (64 solutions to one problem would make 1,024)
REPEAT_COSINE = 0.97  # a step this close to an earlier one repeats it
# The PRM's first-error threshold is chosen on the training problems, cross-fitted: each fold's solutions are scored
# by a head fitted on the other folds, and the threshold is where first-error F1 peaks over all of them. Chosen on
# the version's held-out split instead, the F1 the compare reports there at that threshold was measured on the data
# that chose it (on the demo 18.5 % in-sample, against 15.3 % at the threshold its training problems give).
CALIBRATION_FOLDS = 5


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray((a * b).sum(axis=-1, keepdims=True), dtype=np.float32)  # the vectors are unit length


def _lexical(recipe: str) -> bool:
    return recipe.startswith("lexical")


def _with_text(recipe: str) -> bool:
    return recipe.endswith("+text")


def reads_vectors(recipe: str) -> bool:
    """Whether the recipe's columns come from the backbone's cached vectors (every recipe but ``lexical``)."""
    return recipe != VECTOR_FREE


def _failed_before(text: np.ndarray) -> np.ndarray:
    """Per step, from its rows of text features: 1 where an earlier step already failed the arithmetic check."""
    wrong = text[:, TEXT_NAMES.index("any_wrong")]
    return np.concatenate([[0.0], np.maximum.accumulate(wrong)[:-1]]).astype(np.float32)


def _standardisation(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each column's mean and scale (a constant column keeps scale 1)."""
    scale = x.std(axis=0)
    scale[scale < 1e-6] = 1.0
    return x.mean(axis=0), scale


def _class_weights(negative_weight: float | str) -> Any:
    """scikit-learn's ``class_weight`` for the job's ``negative_weight``."""
    return "balanced" if negative_weight == "balanced" else {0: float(negative_weight), 1: 1.0}


def _log_loss(y: np.ndarray, probs: np.ndarray) -> float:
    """The mean log loss of P(correct) against the labels (probabilities clipped away from 0 and 1)."""
    clipped = np.clip(probs, 1e-7, 1 - 1e-7)
    return float(-np.mean(y * np.log(clipped) + (1 - y) * np.log(1 - clipped)))


def sibling_pairs(contexts: Sequence[str], y: np.ndarray, *, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(better, worse) example indices: every positive and negative example that share a context, at most
    ``SIBLING_PAIRS_PER_CONTEXT`` per context (a seeded sample beyond)."""
    members: dict[str, list[int]] = {}
    for index, context in enumerate(contexts):
        members.setdefault(context, []).append(index)
    rng = np.random.default_rng(seed)
    better: list[int] = []
    worse: list[int] = []
    for indices in members.values():
        pairs = [(a, b) for a in indices if y[a] == 1 for b in indices if y[b] == 0]
        if len(pairs) > SIBLING_PAIRS_PER_CONTEXT:
            pairs = [pairs[i] for i in sorted(rng.choice(len(pairs), SIBLING_PAIRS_PER_CONTEXT, replace=False))]
        better += [a for a, _ in pairs]
        worse += [b for _, b in pairs]
    return np.array(better, dtype=np.int64), np.array(worse, dtype=np.int64)


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


def _step_scalars(cache: FeatureCache | None, prompt: str, steps: Sequence[str], recipe: str) -> np.ndarray:
    """The lexical recipes' dense columns of each step: its position, (``lexical+cosines``) its cosines, its
    text features, whether an earlier step failed the arithmetic check, and where its numbers come from
    (``textfeatures``)."""
    text = steps_text_features(prompt, steps)
    position = np.log1p(np.arange(len(steps), dtype=np.float32))[:, None]
    cosines = [_cosine_columns(_vectors(cache, recipe), prompt, steps)] if reads_vectors(recipe) else []
    return np.hstack([position, *cosines, text, _failed_before(text)[:, None],
                      provenance_features(prompt, steps)]).astype(np.float32)


def _vectors(cache: FeatureCache | None, recipe: str) -> FeatureCache:
    if cache is None:
        raise ValueError(f"head_features {recipe!r} reads the backbone's vectors: a feature cache is needed")
    return cache


def step_features(cache: FeatureCache | None, prompt: str, steps: Sequence[str], recipe: str) -> np.ndarray:
    """One row per step: what the PRM head reads. ``lexical`` (no ``cache`` needed) and ``lexical+cosines``: the
    step's scalar columns and its previous step's (the vectors themselves are left out: measured, they fit the
    training problems' topics, not the steps' correctness); its words are the head's other input
    (``LexicalHead``). ``+text`` adds the step's own
    text features and whether an earlier step already failed the arithmetic check (``textfeatures``). The
    position is the step's index, never its share of the solution (a labeled row that ends at a rated
    alternative would teach "the last step is wrong", which no unlabeled solution tells)."""
    if _lexical(recipe):
        scalars = _step_scalars(cache, prompt, steps, recipe)
        return np.hstack([scalars, np.vstack([np.zeros_like(scalars[:1]), scalars[:-1]])])
    cache = _vectors(cache, recipe)
    problem = cache.get(prompt)[None, :]
    current = np.stack([cache.get(s) for s in steps])
    position = np.log1p(np.arange(len(steps), dtype=np.float32))[:, None]
    if recipe == "step":
        return np.hstack([current, problem.repeat(len(steps), 0), current * problem, position])
    previous = np.vstack([np.zeros_like(problem), current[:-1]])
    columns = [current, previous, problem.repeat(len(steps), 0), current * problem, current * previous,
               position, _cosine(current, problem), _cosine(current, previous)]
    if _with_text(recipe):
        text = steps_text_features(prompt, steps)
        columns += [text, _failed_before(text)[:, None]]
    return np.hstack(columns)


def solution_features(cache: FeatureCache | None, prompt: str, steps: Sequence[str],
                      recipe: str = "context") -> np.ndarray:
    """One row per solution: what the ORM head reads. ``+text``: the steps' text features too (their mean, and
    the most wrong equalities in one step), the same evidence the PRM gets; the lexical recipes: the mean and
    maximum of the steps' scalar columns and the number of steps (the solution's words are the head's other
    input)."""
    if _lexical(recipe):
        scalars = _step_scalars(cache, prompt, steps, recipe)
        return np.concatenate([scalars.mean(axis=0), scalars.max(axis=0),
                               np.log1p(np.array([len(steps)], dtype=np.float32))])
    cache = _vectors(cache, recipe)
    problem = cache.get(prompt)
    vectors = np.stack([cache.get(s) for s in steps])
    last = vectors[-1]
    columns = [vectors.mean(axis=0), last, problem, last * problem,
               np.log1p(np.array([len(steps)], dtype=np.float32))]
    if _with_text(recipe):
        text = steps_text_features(prompt, steps)
        columns += [text.mean(axis=0), text.max(axis=0)]
    return np.concatenate(columns)


def orm_steps(completion: str) -> list[str]:
    """An outcome row's solution as the exporter wrote it (steps joined by newlines), split back into steps so
    that an ORM reads the same cached step vectors as the PRM."""
    return [line for line in completion.split("\n") if line.strip()] or [completion]


class LinearHead:
    """Standardise, then logistic regression: P(correct) = sigmoid(w · (x − mean) / scale + b)."""

    def __init__(self, mean: np.ndarray, scale: np.ndarray, coef: np.ndarray, intercept: float) -> None:
        self.mean, self.scale, self.coef, self.intercept = mean, scale, coef, float(intercept)

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray, *, negative_weight: float | str, iterations: int,
            seed: int) -> tuple[LinearHead, dict[str, Any]]:
        from sklearn.linear_model import LogisticRegression

        mean, scale = _standardisation(x)
        model = LogisticRegression(C=REGULARISATION, class_weight=_class_weights(negative_weight),
                                   max_iter=iterations, random_state=seed)
        model.fit((x - mean) / scale, y)
        head = cls(mean.astype(np.float32), scale.astype(np.float32), model.coef_[0].astype(np.float32),
                   float(model.intercept_[0]))
        return head, {"iterations": int(np.max(model.n_iter_)), "loss": _log_loss(y, head.predict(x))}

    def predict(self, x: np.ndarray) -> np.ndarray:
        z = ((x - self.mean) / self.scale) @ self.coef + self.intercept
        return np.asarray(1.0 / (1.0 + np.exp(-z)), dtype=np.float64)

    @property
    def parameters(self) -> int:
        return int(self.coef.size + 1)

    def save(self, folder: Path) -> None:
        np.savez(folder / HEAD_FILE, mean=self.mean, scale=self.scale, coef=self.coef,
                 intercept=np.array([self.intercept]))


class MlpHead:
    """Standardise, one ReLU hidden layer, then a logistic output; trained with AdamW on the weighted log loss,
    stopped where the log loss of a held-aside tenth of the training problems is lowest (the best epoch's
    weights are kept)."""

    def __init__(self, mean: np.ndarray, scale: np.ndarray, hidden_weight: np.ndarray, hidden_bias: np.ndarray,
                 coef: np.ndarray, intercept: float) -> None:
        self.mean, self.scale = mean, scale
        self.hidden_weight, self.hidden_bias = hidden_weight, hidden_bias
        self.coef, self.intercept = coef, float(intercept)

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray, groups: np.ndarray, *, negative_weight: float | str,
            iterations: int, seed: int) -> tuple[MlpHead, dict[str, Any]]:
        """``groups``: each example's problem (the early-stopping split keeps a problem's steps on one side);
        ``iterations``: the most epochs."""
        import torch

        torch.manual_seed(seed)
        mean, scale = _standardisation(x)
        held = np.array([_held_aside(str(g), seed) for g in groups], dtype=bool)
        if held.all() or not held.any():  # few problems: every tenth example instead
            held = np.arange(len(y)) % 10 == 0
        negatives = max(int((y == 0).sum()), 1)
        weight0 = (y.size - negatives) / negatives if negative_weight == "balanced" else float(negative_weight)
        xs = torch.from_numpy(((x - mean) / scale).astype(np.float32))
        ys = torch.from_numpy(y.astype(np.float32))
        ws = torch.where(ys > 0.5, 1.0, weight0)
        train_index = torch.from_numpy(np.flatnonzero(~held))
        held_index = torch.from_numpy(np.flatnonzero(held))
        net = torch.nn.Sequential(torch.nn.Dropout(MLP_INPUT_DROPOUT), torch.nn.Linear(x.shape[1], MLP_HIDDEN),
                                  torch.nn.ReLU(), torch.nn.Dropout(MLP_DROPOUT), torch.nn.Linear(MLP_HIDDEN, 1))
        optimizer = torch.optim.AdamW(net.parameters(), lr=MLP_LEARNING_RATE, weight_decay=MLP_WEIGHT_DECAY)
        loss_of = torch.nn.functional.binary_cross_entropy_with_logits
        best: tuple[float, int, list[torch.Tensor]] = (float("inf"), -1, [])
        epochs = min(iterations, MLP_MAX_EPOCHS)
        for epoch in range(epochs):
            net.train()
            order = train_index[torch.randperm(train_index.numel())]
            for start in range(0, order.numel(), MLP_BATCH):
                batch = order[start:start + MLP_BATCH]
                optimizer.zero_grad()
                loss = loss_of(net(xs[batch]).squeeze(-1), ys[batch], weight=ws[batch])
                loss.backward()
                optimizer.step()
            net.eval()
            with torch.inference_mode():
                held_loss = float(loss_of(net(xs[held_index]).squeeze(-1), ys[held_index], weight=ws[held_index]))
            if held_loss < best[0]:
                best = (held_loss, epoch, [p.detach().clone() for p in net.parameters()])
            elif epoch - best[1] >= MLP_PATIENCE:
                break
        hidden_weight, hidden_bias, coef, intercept = (t.numpy() for t in best[2])
        head = cls(mean.astype(np.float32), scale.astype(np.float32), hidden_weight.T.astype(np.float32),
                   hidden_bias.astype(np.float32), coef[0].astype(np.float32), float(intercept[0]))
        return head, {"iterations": best[1] + 1, "loss": _log_loss(y, head.predict(x)),
                      "early_stopping_loss": best[0]}

    def predict(self, x: np.ndarray) -> np.ndarray:
        hidden = np.maximum(((x - self.mean) / self.scale) @ self.hidden_weight + self.hidden_bias, 0.0)
        z = hidden @ self.coef + self.intercept
        return np.asarray(1.0 / (1.0 + np.exp(-z)), dtype=np.float64)

    @property
    def parameters(self) -> int:
        return int(self.hidden_weight.size + self.hidden_bias.size + self.coef.size + 1)

    def save(self, folder: Path) -> None:
        np.savez(folder / HEAD_FILE, mean=self.mean, scale=self.scale, hidden_weight=self.hidden_weight,
                 hidden_bias=self.hidden_bias, coef=self.coef, intercept=np.array([self.intercept]))


def marked(texts: Sequence[str]) -> list[str]:
    """Each text between the start and end words, so that a bigram says how it opens and how it ends."""
    return [f"{TEXT_START} {text} {TEXT_END}" for text in texts]


class BoostedTrees:
    """Gradient-boosted trees (LightGBM) over a lexical head's dense columns and the texts' binary word n-grams
    (those at least ``TREE_MIN_DF`` training texts hold): their log-odds join the logistic regression's."""

    def __init__(self, booster: Any, vocabulary: np.ndarray) -> None:
        self.booster, self.vocabulary = booster, vocabulary
        self._vectorizer: Any = None

    @staticmethod
    def _new_vectorizer(**kwargs: Any) -> Any:
        from sklearn.feature_extraction.text import CountVectorizer

        return CountVectorizer(ngram_range=(1, 2), binary=True, token_pattern=LEXICAL_TOKENS, dtype=np.float32,
                               **kwargs)

    @staticmethod
    def _columns(x: np.ndarray, words: Any) -> Any:
        from scipy import sparse

        dense = sparse.csr_matrix(x)
        return dense if words is None else sparse.hstack([dense, words]).tocsr()

    @classmethod
    def fit(cls, x: np.ndarray, texts: Sequence[str], y: np.ndarray, *, sample_weight: np.ndarray,
            seed: int) -> tuple[BoostedTrees, np.ndarray]:
        """The trees and their log-odds of the training examples (from the columns built for the fit: the texts
        are split into n-grams once). ``x``: the dense columns as built (trees need no standardisation)."""
        import lightgbm

        vectorizer = cls._new_vectorizer(min_df=TREE_MIN_DF)
        try:
            words = vectorizer.fit_transform(marked(texts))
            vocabulary = np.asarray(vectorizer.get_feature_names_out(), dtype=str)
        except ValueError:  # no n-gram in enough texts: the trees read the dense columns only
            words, vocabulary = None, np.zeros(0, dtype=str)
        params = {"objective": "binary", "learning_rate": TREE_LEARNING_RATE, "num_leaves": TREE_LEAVES,
                  "min_data_in_leaf": TREE_MIN_CHILD, "bagging_fraction": TREE_ROW_SHARE, "bagging_freq": 1,
                  "feature_fraction": TREE_COLUMN_SHARE, "lambda_l2": TREE_L2, "seed": seed,
                  "num_threads": 1 if len(y) < TREE_THREADED_EXAMPLES else 0,  # 0: OpenMP's default, every core
                  # the same trees whatever the number of threads
                  "deterministic": True, "force_col_wise": True, "verbose": -1}
        columns = cls._columns(x, words)
        data = lightgbm.Dataset(columns, label=y, weight=sample_weight, params={"verbose": -1})
        booster = lightgbm.train(params, data, num_boost_round=TREE_ROUNDS)
        return cls(booster, vocabulary), np.asarray(booster.predict(columns, raw_score=True), dtype=np.float64)

    def log_odds(self, x: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        words = None
        if self.vocabulary.size:
            if self._vectorizer is None:
                self._vectorizer = self._new_vectorizer(
                    vocabulary={str(t): i for i, t in enumerate(self.vocabulary)})
            words = self._vectorizer.transform(marked(texts))
        return np.asarray(self.booster.predict(self._columns(x, words), raw_score=True), dtype=np.float64)

    @property
    def parameters(self) -> int:
        """Leaf values and split thresholds."""
        return int(sum(2 * tree["num_leaves"] - 1 for tree in self.booster.dump_model()["tree_info"]))

    def save(self, folder: Path) -> None:
        """The booster in LightGBM's text format (no pickle); the vocabulary goes into the head's arrays."""
        (folder / TREES_FILE).write_text(self.booster.model_to_string(), encoding="utf-8")

    @classmethod
    def load(cls, folder: Path, vocabulary: np.ndarray) -> BoostedTrees:
        import lightgbm

        return cls(lightgbm.Booster(model_str=(folder / TREES_FILE).read_text(encoding="utf-8")), vocabulary)


class LexicalHead:
    """One logistic regression over the standardised dense columns and the text's word n-grams (unigrams and
    bigrams, TF-IDF with sublinear counts, L2-normalised): P(correct) = sigmoid(w · x' + v · tfidf(text) + b);
    with ``trees`` (``head_model: linear+trees``), the sigmoid of that log-odds averaged with the boosted trees'
    (``TREE_WEIGHT``). The vocabulary, its IDF weights and the recipe of the dense columns are saved with the
    weights, so scoring builds the same columns."""

    def __init__(self, mean: np.ndarray, scale: np.ndarray, coef: np.ndarray, vocabulary: np.ndarray,
                 idf: np.ndarray, word_coef: np.ndarray, intercept: float, *, tokens: str = LEXICAL_TOKENS,
                 marks: bool = True, recipe: str = VECTOR_FREE, trees: BoostedTrees | None = None) -> None:
        self.mean, self.scale, self.coef, self.intercept = mean, scale, coef, float(intercept)
        self.vocabulary, self.idf, self.word_coef = vocabulary, idf, word_coef
        self.tokens, self.marks, self.recipe, self.trees = tokens, marks, recipe, trees
        self._vectorizer: Any = None

    @staticmethod
    def _new_vectorizer(tokens: str, **kwargs: Any) -> Any:
        from sklearn.feature_extraction.text import TfidfVectorizer

        return TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, token_pattern=tokens, dtype=np.float32,
                               **kwargs)

    @classmethod
    def fit(cls, x: np.ndarray, texts: Sequence[str], y: np.ndarray, *, contexts: Sequence[str] | None = None,
            negative_weight: float | str, iterations: int, seed: int, recipe: str = VECTOR_FREE,
            trees: bool = False) -> tuple[LexicalHead, dict[str, Any]]:
        """``contexts``: each example's context key; examples sharing one with opposite labels are also fitted
        as pairs (``sibling_pairs``). The intercept is a column of ones, which a pair's difference cancels.
        ``recipe``: the lexical recipe that built ``x``, saved with the head; ``trees``: boosted trees too, on
        the same examples and class weights (``BoostedTrees``)."""
        from scipy import sparse
        from sklearn.linear_model import LogisticRegression
        from sklearn.utils.class_weight import compute_sample_weight

        mean, scale = _standardisation(x)
        min_df = LEXICAL_MIN_DF if len(texts) >= LEXICAL_MIN_DF_TEXTS else 1
        vectorizer = cls._new_vectorizer(LEXICAL_TOKENS, min_df=min_df, max_features=LEXICAL_MAX_NGRAMS)
        try:
            words = vectorizer.fit_transform(marked(texts))
        except ValueError:  # scikit-learn's "empty vocabulary": no text holds a word, a number or an operator
            raise ValueError("the training texts hold no word, number or operator for the lexical head") from None
        examples = sparse.hstack([sparse.csr_matrix((x - mean) / scale), words]).tocsr()
        better, worse = sibling_pairs(contexts, y, seed=seed) if contexts is not None else (np.zeros(0, int),) * 2
        contrast = SIBLING_WEIGHT * (examples[better] - examples[worse])
        no_intercept = sparse.csr_matrix((len(better), 1), dtype=np.float32)
        design = sparse.vstack([sparse.hstack([examples, np.ones((len(y), 1), np.float32)]),
                                sparse.hstack([contrast, no_intercept]),
                                sparse.hstack([-contrast, no_intercept])]).tocsr()
        weights = compute_sample_weight(_class_weights(negative_weight), y)
        model = LogisticRegression(C=LEXICAL_REGULARISATION, fit_intercept=False, max_iter=iterations,
                                   random_state=seed)
        model.fit(design, np.concatenate([y, np.ones(len(better)), np.zeros(len(better))]).astype(np.int64),
                  sample_weight=np.concatenate([weights, np.ones(2 * len(better))]))
        coef = model.coef_[0].astype(np.float32)
        width = x.shape[1]
        boosted, tree_log_odds = (BoostedTrees.fit(x, texts, y, sample_weight=weights, seed=seed) if trees
                                  else (None, None))
        head = cls(mean.astype(np.float32), scale.astype(np.float32), coef[:width],
                   np.asarray(vectorizer.get_feature_names_out(), dtype=str), vectorizer.idf_.astype(np.float32),
                   coef[width:-1], float(coef[-1]), recipe=recipe, trees=boosted)
        # the training loss from the columns already built (head.predict would tokenize every text again)
        log_odds = np.asarray(examples @ coef[:-1] + coef[-1], dtype=np.float64)
        if tree_log_odds is not None:
            log_odds = head.blend(log_odds, tree_log_odds)
        fit = {"iterations": int(np.max(model.n_iter_)), "loss": _log_loss(y, 1.0 / (1.0 + np.exp(-log_odds))),
               "ngrams": int(head.word_coef.size), "sibling_pairs": int(len(better))}
        if boosted is not None:
            fit.update(trees=int(boosted.booster.num_trees()), tree_ngrams=int(boosted.vocabulary.size))
        return head, fit

    @staticmethod
    def blend(linear: np.ndarray, trees: np.ndarray) -> np.ndarray:
        """The log-odds of the regression and of the trees, averaged at the trees' share ``TREE_WEIGHT``."""
        return np.asarray((1.0 - TREE_WEIGHT) * linear + TREE_WEIGHT * trees, dtype=np.float64)

    def _words(self, texts: Sequence[str]) -> Any:
        if self._vectorizer is None:
            vectorizer = self._new_vectorizer(self.tokens,
                                              vocabulary={str(t): i for i, t in enumerate(self.vocabulary)})
            vectorizer.idf_ = self.idf  # scikit-learn's way to restore a fitted vocabulary's weights
            self._vectorizer = vectorizer
        return self._vectorizer.transform(marked(texts) if self.marks else texts)

    def predict(self, x: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        # in float64: a step scores the same, to the last digits a threshold compares, alone or in a batch
        # (float32 products differ by ~1e-7 with the batch's shape)
        z = (((x - self.mean) / self.scale).astype(np.float64) @ self.coef.astype(np.float64)
             + self._words(texts) @ self.word_coef.astype(np.float64) + self.intercept)
        if self.trees is not None:
            z = self.blend(z, self.trees.log_odds(x, texts))
        return np.asarray(1.0 / (1.0 + np.exp(-z)), dtype=np.float64)

    @property
    def parameters(self) -> int:
        return int(self.coef.size + self.word_coef.size + 1) + (self.trees.parameters if self.trees else 0)

    def save(self, folder: Path) -> None:
        arrays: dict[str, Any] = {
            "mean": self.mean, "scale": self.scale, "coef": self.coef, "vocabulary": self.vocabulary, "idf": self.idf,
            "word_coef": self.word_coef, "intercept": np.array([self.intercept]), "tokens": np.array(self.tokens),
            "marks": np.array(self.marks), "features": np.array(self.recipe)}
        if self.trees is not None:
            arrays["tree_vocabulary"] = self.trees.vocabulary
        np.savez(folder / HEAD_FILE, **arrays)
        if self.trees is not None:
            self.trees.save(folder)


Head = LinearHead | MlpHead | LexicalHead


def head_scores(head: Head, x: np.ndarray, texts: Sequence[str]) -> np.ndarray:
    """P(correct) of each row; ``texts``: each row's step (PRM) or solution (ORM), which a lexical head reads."""
    return head.predict(x, texts) if isinstance(head, LexicalHead) else head.predict(x)


def load_head(folder: Path) -> Head:
    """The saved head: linear, MLP (its file holds a hidden layer) or lexical (a vocabulary)."""
    with np.load(folder / HEAD_FILE, allow_pickle=False) as data:
        if "vocabulary" in data:
            saved_tokens = "tokens" in data  # a head saved before punctuation and text marks has neither
            return LexicalHead(data["mean"], data["scale"], data["coef"], data["vocabulary"], data["idf"],
                               data["word_coef"], float(data["intercept"][0]),
                               tokens=str(data["tokens"]) if saved_tokens else LEGACY_LEXICAL_TOKENS,
                               marks=bool(data["marks"]) if saved_tokens else False,
                               recipe=str(data["features"]) if "features" in data else LEGACY_LEXICAL_RECIPE,
                               trees=(BoostedTrees.load(folder, data["tree_vocabulary"])
                                      if "tree_vocabulary" in data else None))
        if "hidden_weight" in data:
            return MlpHead(data["mean"], data["scale"], data["hidden_weight"], data["hidden_bias"], data["coef"],
                           float(data["intercept"][0]))
        return LinearHead(data["mean"], data["scale"], data["coef"], float(data["intercept"][0]))


def _held_aside(group: str, seed: int) -> bool:
    """A tenth of the training problems, for the MLP's early stopping (not the job's validation split)."""
    return int(hashlib.sha256(f"head:{seed}:{group}".encode()).hexdigest()[:8], 16) % 10 == 0


def backbone_folder(base_model: str | None, resolved: str | None) -> Path:
    if resolved:
        return Path(resolved)
    return default_model_path() if base_model in (None, "default") else Path(str(base_model))


def texts_of(rows: Sequence[PrmRow] | Sequence[OrmRow]) -> list[str]:
    texts: list[str] = []
    for row in rows:
        texts.append(row.prompt)
        texts.extend(row.steps if isinstance(row, PrmRow) else orm_steps(row.completion))
    return texts


def _problem(row: PrmRow | OrmRow) -> str:
    return row.problem_id or row.prompt


class Examples(NamedTuple):
    """A head's training input: one row of features, text, label, problem and context per labeled step or
    solution (the context: what the example was written after, the problem and a PRM step's earlier steps)."""

    x: np.ndarray
    texts: list[str]
    y: np.ndarray
    groups: np.ndarray
    contexts: list[str]


def prm_examples(cache: FeatureCache | None, rows: Sequence[PrmRow], recipe: str,
                 row_features: Sequence[np.ndarray] | None = None) -> Examples:
    """Every labeled step (neutral-excluded and repeated ones left out); its text is the step's.
    ``row_features``: each row's ``step_features``, when the caller already built them."""
    xs: list[np.ndarray] = []
    texts: list[str] = []
    ys: list[int] = []
    groups: list[str] = []
    contexts: list[str] = []
    for number, row in enumerate(rows):
        keep = [i for i, label in enumerate(row.labels) if label != IGNORE_INDEX]
        if keep:
            features = (row_features[number] if row_features is not None
                        else step_features(cache, row.prompt, row.steps, recipe))
            xs.append(features[keep])
            texts.extend(row.steps[i] for i in keep)
            ys.extend(row.labels[i] for i in keep)
            groups.extend([_problem(row)] * len(keep))
            before = prefix_digests(row.prompt, row.steps)  # entry i: the problem and the steps before step i
            contexts.extend(before[i] for i in keep)
    width = len(step_features(cache, rows[0].prompt, rows[0].steps[:1], recipe)[0]) if rows else 0
    return Examples((np.vstack(xs) if xs else np.zeros((0, width), np.float32)), texts,
                    np.array(ys, dtype=np.int64), np.array(groups, dtype=object), contexts)


def orm_examples(cache: FeatureCache | None, rows: Sequence[OrmRow], recipe: str) -> Examples:
    """Every solution; its text is the whole solution, its context the problem."""
    if not rows:
        return Examples(np.zeros((0, 0), np.float32), [], np.zeros(0, np.int64), np.zeros(0, dtype=object), [])
    problems = [_problem(r) for r in rows]
    return Examples(np.stack([solution_features(cache, r.prompt, orm_steps(r.completion), recipe) for r in rows]),
                    [r.completion for r in rows], np.array([r.label for r in rows], dtype=np.int64),
                    np.array(problems, dtype=object), problems)


def fit_head(model: str, recipe: str, examples: Examples, *, negative_weight: float | str,
             iterations: int | None, seed: int) -> tuple[Head, dict[str, Any]]:
    """The configured classifier fitted (the lexical recipe's is always ``LexicalHead``, with boosted trees for
    ``linear+trees``); ``iterations``: the optimizer's (linear, lexical) or the most epochs (MLP)."""
    x, y, groups = examples.x, examples.y, examples.groups
    if _lexical(recipe):
        return LexicalHead.fit(x, examples.texts, y, contexts=examples.contexts, negative_weight=negative_weight,
                               iterations=iterations or DEFAULT_ITERATIONS, seed=seed, recipe=recipe,
                               trees=model == LINEAR_AND_TREES)
    if model == "mlp":
        return MlpHead.fit(x, y, groups, negative_weight=negative_weight, iterations=iterations or MLP_MAX_EPOCHS,
                           seed=seed)
    return LinearHead.fit(x, y, negative_weight=negative_weight, iterations=iterations or DEFAULT_ITERATIONS,
                          seed=seed)


def distinct_steps(items: Sequence[tuple[str, Sequence[str]]]) -> tuple[list[tuple[int, int]], list[list[int]]]:
    """Each distinct step in its context (its problem and the steps before it) once: the (item, step) where it
    first occurs, and for each item the distinct step each of its steps is. A step's columns and score depend on
    that context only, and an ``alternatives`` export repeats every chosen prefix in each alternative's row after
    it (the demo's held-out rows: 51,891 steps, 4,903 distinct), so each is scored once, in one call (a lexical
    head's vectorizer is also slow called row by row)."""
    keys: dict[str, int] = {}
    picks: list[tuple[int, int]] = []
    where: list[list[int]] = []
    for item, (prompt, steps) in enumerate(items):
        positions = []
        for step, digest in enumerate(prefix_digests(prompt, steps)[1:]):  # entry i: the steps up to step i
            if digest not in keys:
                keys[digest] = len(picks)
                picks.append((item, step))
            positions.append(keys[digest])
        where.append(positions)
    return picks, where


def step_scores_of(head: Head, items: Sequence[tuple[str, Sequence[str]]],
                   features_of: Callable[[int], np.ndarray]) -> list[np.ndarray]:
    """Each item's step scores, each distinct step scored once (``distinct_steps``) in one call;
    ``features_of(i)``: item i's ``step_features``, asked only of the items that hold a step first."""
    picks, where = distinct_steps(items)
    if not picks:
        return [np.zeros(0) for _ in items]
    features = {item: features_of(item) for item in dict.fromkeys(item for item, _ in picks)}
    distinct = head_scores(head, np.stack([features[item][step] for item, step in picks]),
                           [items[item][1][step] for item, step in picks])
    return [distinct[positions] for positions in where]


def _subset(examples: Examples, keep: np.ndarray) -> Examples:
    index = np.flatnonzero(keep)
    return Examples(examples.x[index], [examples.texts[i] for i in index], examples.y[index],
                    examples.groups[index], [examples.contexts[i] for i in index])


def _labeled(scores: np.ndarray, row: PrmRow) -> list[tuple[float, int]]:
    """(score, label) of a row's labeled steps, from the scores of all its steps."""
    return [(float(s), int(lab)) for s, lab in zip(scores, row.labels, strict=True) if lab != IGNORE_INDEX]


def _first_error(labeled: Sequence[tuple[float, int]]) -> int:
    return next((i for i, (_, lab) in enumerate(labeled) if lab == 0), -1)


def crossfit_threshold(model: str, recipe: str, examples: Examples, rows: Sequence[PrmRow],
                       row_features: Sequence[np.ndarray], *, folds: int = CALIBRATION_FOLDS,
                       negative_weight: float | str, iterations: int | None, seed: int) -> dict[str, Any] | None:
    """The first-error threshold chosen on the training problems: they are dealt into ``folds`` folds (fewer
    when there are fewer problems; a seeded order), each fold's rows are scored by a head fitted on the other
    folds' ``examples``, and the threshold is where first-error F1 peaks over all those out-of-fold rows
    (``calibrate_threshold``). ``rows``: every training row, each step as the compare scores it (not deduped), with
    its ``row_features``. None with fewer than two problems, or when no fold's rows hold both an erroneous and a
    correct solution."""
    from ..evaluation.step_metrics import calibrate_threshold

    problems = sorted(set(examples.groups),
                      key=lambda p: hashlib.sha256(f"calibration:{seed}:{p}".encode()).hexdigest())
    count = min(folds, len(problems))
    if count < 2:
        return None
    fold_of = {problem: number % count for number, problem in enumerate(problems)}
    example_folds = np.array([fold_of[g] for g in examples.groups])
    row_folds = [fold_of.get(_problem(row)) for row in rows]  # None: a row with no labeled step to learn from
    per_row: list[list[float]] = []
    first_errors: list[int] = []
    for fold in range(count):
        outside = example_folds != fold
        if len(np.unique(examples.y[outside])) < 2:  # this fold's training rest cannot fit a classifier
            continue
        head, _ = fit_head(model, recipe, _subset(examples, outside), negative_weight=negative_weight,
                           iterations=iterations, seed=seed)
        inside = [number for number, row_fold in enumerate(row_folds) if row_fold == fold]
        if not inside:
            continue
        fold_features = [row_features[n] for n in inside]
        scores = step_scores_of(head, [(rows[n].prompt, rows[n].steps) for n in inside], fold_features.__getitem__)
        for n, row_scores in zip(inside, scores, strict=True):
            if labeled := _labeled(row_scores, rows[n]):
                per_row.append([s for s, _ in labeled])
                first_errors.append(_first_error(labeled))
    calibration = calibrate_threshold(first_errors, per_row)
    if calibration["threshold"] is None:
        return None
    return {**calibration, "folds": count, "problems": len(problems), "rows": len(per_row),
            "source": "training problems, cross-fitted"}


def validation_figures(kind: str, head: Head, cache: FeatureCache | None, rows: Sequence[Any],
                       recipe: str, aggregation: str, *,
                       calibration: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The same figures as fine-tuning reports, plus (PRM) the first-error threshold: ``calibration``'s, chosen
    on the training problems (``crossfit_threshold``), with the F1 these rows give at it and at 0.5 and their 95 %
    intervals over the rows' problems (``intervals``: ``step_level_intervals``, the paired gain over 0.5 included);
    without one, the threshold is calibrated on these rows themselves (no interval: they chose it)."""
    from ..evaluation.intervals import step_level_intervals
    from ..evaluation.step_metrics import calibrate_threshold
    from .scoring import aggregate
    from .train import binary_figures

    if not rows:
        return None
    if kind == "orm":
        examples = orm_examples(cache, rows, recipe)
        return {"solution_level": binary_figures(head_scores(head, examples.x, examples.texts), examples.y)}
    step_scores, step_truth, solution_scores, solution_truth = [], [], [], []
    per_row: list[list[float]] = []
    first_errors: list[int] = []
    problems: list[str] = []
    ratings: list[list[int]] = []  # as the compare's step-level figures take them: +1 correct (or neutral), −1 not
    scores = step_scores_of(head, [(row.prompt, row.steps) for row in rows],
                            lambda n: step_features(cache, rows[n].prompt, rows[n].steps, recipe))
    for row, row_scores in zip(rows, scores, strict=True):
        labeled = _labeled(row_scores, row)
        if not labeled:
            continue
        step_scores += [s for s, _ in labeled]
        step_truth += [lab for _, lab in labeled]
        solution_scores.append(aggregate([s for s, _ in labeled], aggregation))
        solution_truth.append(int(all(lab for _, lab in labeled)))
        per_row.append([s for s, _ in labeled])
        first_errors.append(_first_error(labeled))
        problems.append(_problem(row))
        ratings.append([1 if lab else -1 for _, lab in labeled])
    figures: dict[str, Any] = {
        "step_level": binary_figures(np.array(step_scores), np.array(step_truth)),
        "solution_level": binary_figures(np.array(solution_scores), np.array(solution_truth)),
    }
    if calibration is None:
        figures.update(calibrate_threshold(first_errors, per_row))
        figures["calibration"] = {"source": "validation split"} if figures["threshold"] is not None else None
        return figures

    # these rows did not choose the threshold: its F1 here, at 0.5 and the paired gain over 0.5 each carry an
    # interval over their problems, as the compare's step-level table does for the held-out split it scores
    intervals = step_level_intervals(per_row, ratings, groups=problems, threshold=calibration["threshold"],
                                     seed=0) if per_row else None
    figures.update(threshold=calibration["threshold"], calibration=calibration, intervals=intervals,
                   f1_calibrated=((intervals or {}).get("first_error_f1_calibrated") or {}).get("value"),
                   f1_at_default=((intervals or {}).get("first_error_f1") or {}).get("value"))
    return figures


def run_head_training(config: TrainConfig, events: Any, started: float) -> dict[str, Any]:
    """Read, encode (cached), fit, validate, save; returns ``metrics.json``'s content."""
    from .modeling import ModelSpec
    from .train import dedupe_step_labels

    rows, excluded = without_problems(read_dataset(config.dataset, config.kind, config.neutral),
                                      config.exclude_problems)
    if config.answers == "neutral":
        rows = with_neutral_answers(rows)
    if not rows:
        raise ValueError(f"{config.dataset}: the {config.kind.upper()} dataset has no rows"
                         f"{f' outside the {len(config.exclude_problems)} excluded problems' if excluded else ''}: "
                         f"nothing to train on")
    train_rows, eval_rows = split_rows(rows, config.eval_fraction, config.seed)
    if config.limit is not None:
        train_rows = train_rows[:config.limit]
    if not train_rows:
        raise ValueError(f"{config.dataset}: no training rows")
    recipe = config.head_features
    texts = texts_of(list(train_rows) + list(eval_rows))
    cache_root = config.feature_cache or config.dataset.parent / "features"
    cache, encode_s = None, 0.0
    if reads_vectors(recipe):
        cache = FeatureCache(cache_root, config.base_model_path, config.max_length)
        encode_started = time.time()
        reported = [0]

        def progress(done: int, total: int) -> None:  # a "features" event every 2,048 texts encoded, and the last
            if done == total or done - reported[0] >= 2048:
                reported[0] = done
                events.write("features", done=done, total=total)

        cache.ensure(texts, progress)
        encode_s = time.time() - encode_started
        events.write("features", computed=cache.computed, texts=len(set(texts)), cache=str(cache.folder),
                     seconds=round(encode_s, 1))
    repeated = 0
    row_features: list[np.ndarray] = []
    scored_rows: Sequence[PrmRow] = []  # each step as the compare scores it: the threshold's calibration reads these
    if config.kind == "prm":
        scored_rows = train_rows
        row_features = [step_features(cache, row.prompt, row.steps, recipe) for row in train_rows]
        if config.dedupe_steps:  # the same rows, in the same order, with repeated labels ignored
            train_rows, repeated = dedupe_step_labels(train_rows)
        examples = prm_examples(cache, train_rows, recipe, row_features)
    else:
        examples = orm_examples(cache, train_rows, recipe)
    y = examples.y
    if len(np.unique(y)) < 2:
        raise ValueError(f"{config.dataset}: the training labels are all "
                         f"{'correct' if y.size and y[0] else 'incorrect'}: a classifier needs both")
    counts = {"rows": len(train_rows), "rows_used": len(train_rows), "steps": int(y.size),
              "positive_steps" if config.kind == "prm" else "positive": int(y.sum()),
              "negative_steps" if config.kind == "prm" else "negative": int(y.size - y.sum()),
              "repeated_steps": repeated, "overlong": 0, "excluded_rows": excluded}
    events.write("data", train=counts, eval={"rows": len(eval_rows)}, overlong=0)
    fit_started = time.time()
    head, fit = fit_head(config.head_model, recipe, examples, negative_weight=config.negative_weight,
                         iterations=config.max_steps, seed=config.seed)
    fit_s = time.time() - fit_started
    events.write("log", step=fit["iterations"], loss=fit["loss"], learning_rate=None, epoch=1.0,
                 examples_per_s=round(y.size / max(fit_s, 1e-9), 1))
    calibration, calibration_s = None, 0.0
    if config.kind == "prm":
        calibration_started = time.time()
        calibration = crossfit_threshold(config.head_model, recipe, examples, scored_rows, row_features,
                                         negative_weight=config.negative_weight, iterations=config.max_steps,
                                         seed=config.seed)
        calibration_s = time.time() - calibration_started
    validation = validation_figures(config.kind, head, cache, eval_rows, recipe, config.score_aggregation,
                                    calibration=calibration)
    if validation is None and calibration is not None:  # no validation rows: the threshold still travels
        validation = {"threshold": calibration["threshold"], "calibration": calibration}
    if validation is not None:
        events.write("eval", step=fit["iterations"], **validation)
    output = config.output_dir
    output.mkdir(parents=True, exist_ok=True)
    head.save(output)
    threshold = (validation or {}).get("threshold")
    ModelSpec(kind=config.kind, separator_token="", aggregation=config.score_aggregation, neutral=config.neutral,
              base_model=str(config.base_model_path), max_length=config.max_length, lora=False, method="head",
              threshold=threshold, features=recipe, answers=config.answers,
              feature_cache=str(Path(cache_root).resolve()) if cache is not None else None).save(output)
    runtime = time.time() - started
    metrics = {
        "kind": config.kind, "method": "head",
        "train": {"loss": fit["loss"], "steps": fit["iterations"], "epochs": 1.0, "runtime_s": fit_s,
                  "examples_per_s": y.size / max(fit_s, 1e-9), "tokens": 0, "tokens_per_s": None,
                  "global_batch_size": int(y.size), "negative_weight": config.negative_weight,
                  "features_s": encode_s, "sibling_pairs": fit.get("sibling_pairs", 0), "trees": fit.get("trees", 0),
                  "calibration_s": calibration_s},
        "validation": validation,
        "data": {"train": counts, "validation": {"rows": len(eval_rows), "rows_used": len(eval_rows)},
                 "overlong": 0,
                 "features": {"texts": len(set(texts)), "computed": cache.computed if cache else 0,
                              "cache": str(cache.folder) if cache else None}},
        "model": {"parameters": head.parameters, "trainable_parameters": head.parameters, "method": "head",
                  "features": recipe, "head": config.head_model,
                  "backbone": str(config.base_model_path) if cache is not None else None,  # the one it read
                  "lora": False},
        "world_size": 1,
        "runtime_s": runtime,
    }
    (output / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    events.write("done", model_dir=str(output), train_loss=fit["loss"], runtime_s=runtime)
    return metrics


class HeadScorer:
    """Scores with a saved head: a recipe that reads vectors takes them from the shared cache (texts it lacks are
    encoded and added); ``lexical`` encodes nothing."""

    def __init__(self, folder: Path, spec: Any, *, cache_root: Path | None = None) -> None:
        self.spec = spec
        self.head = load_head(folder)
        # a lexical head knows its own recipe (one saved before the marker read the backbone's cosines)
        self.recipe = self.head.recipe if isinstance(self.head, LexicalHead) else spec.features or "context"
        self.cache: FeatureCache | None = None
        if reads_vectors(self.recipe):
            root = cache_root or (Path(spec.feature_cache) if spec.feature_cache else folder / "features")
            self.cache = FeatureCache(root, backbone_folder(spec.base_model, None), spec.max_length)

    def _ensure(self, items: Sequence[tuple[str, Sequence[str]]]) -> None:
        if self.cache is not None:
            self.cache.ensure([t for prompt, steps in items for t in (prompt, *steps)])

    def steps(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[list[float]]:
        self._ensure(items)
        scores = step_scores_of(self.head, items,
                                lambda n: step_features(self.cache, items[n][0], items[n][1], self.recipe))
        return [[float(p) for p in row] for row in scores]

    def solutions(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[float]:
        self._ensure(items)
        x = np.stack([solution_features(self.cache, prompt, steps, self.recipe) for prompt, steps in items])
        return [float(p) for p in head_scores(self.head, x, ["\n".join(steps) for _, steps in items])]


def resolved_method(method: str) -> str:
    """``auto``: the head on a CPU, fine-tuning where CUDA is present."""
    if method != "auto":
        return method
    import torch

    return "finetune" if torch.cuda.is_available() else "head"

