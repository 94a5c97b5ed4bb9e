"""The lexical head: one logistic regression over a step's (or a solution's) dense columns and its word n-grams,
fitted on the examples and on sibling contrasts, with (``linear+trees``) boosted trees beside it."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .models import class_weights, log_loss, sigmoid, standardisation
from .spec import Recipe

#: inverse L2 strength where the job does not choose one (``tuning`` chooses it on the training problems)
LEXICAL_REGULARISATION = 0.3
#: a word n-gram is a column once this many training texts hold it (where the job does not choose: ``tuning``) ...
LEXICAL_MIN_DF = 3
LEXICAL_MIN_DF_TEXTS = 1000  # ... in a dataset of at least this many texts (a smaller one keeps every n-gram)
LEXICAL_MAX_NGRAMS = 300_000
# words and numbers, the operators a step's arithmetic uses, and the punctuation that tells a question ("?") from
# a claim, a definition (":") or a formula ("$")
LEXICAL_TOKENS = r"(?u)\b\w+\b|[=+\-*/^\\?!.,:;()<>$]"
LEGACY_LEXICAL_TOKENS = r"(?u)\b\w+\b|[=+\-*/^\\]"  # a head saved before punctuation and text marks
# The boosted trees (``linear+trees``): LightGBM over the dense columns and binary n-gram columns, its log-odds
# averaged with the regression's; they find what one weight per column cannot ("the answer is" late in a
# solution vs early). Their settings: docs/training-methods.md.
TREE_ROUNDS = 200
TREE_LEARNING_RATE = 0.05
TREE_LEAVES = 31  # where the job does not choose (``tuning``)
TREE_MIN_CHILD = 40  # examples per leaf at least
TREE_ROW_SHARE = 0.8  # each round fits on this share of the examples ...
TREE_COLUMN_SHARE = 0.5  # ... and each tree reads this share of the columns
# an n-gram is a tree column once this many training texts hold it (one held by fewer than TREE_MIN_CHILD texts
# can never be split on anyway)
TREE_MIN_DF = 20
# below this many examples the trees grow on one thread: waking a second one each round costs more than it saves
TREE_THREADED_EXAMPLES = 20_000
TREE_L2 = 1.0  # L2 penalty on the leaves' values
TREE_WEIGHT = 0.5  # the trees' share of the blended log-odds where the job does not choose (``tuning``)
# Words put around each text before it is split into n-grams, so that a bigram says how a step opens ("xxstart
# So") and how it ends ("? xxend"): a planning question is rarely wrong, a concluding claim often is.
TEXT_START, TEXT_END = "xxstart", "xxend"
# Sibling contrasts: examples that share their context (a PRM step: the problem and every step before it, as the
# labelers' rated alternatives do; an ORM solution: the problem) with opposite labels also enter the fit as
# pairs, "the better one scores higher", at this weight against the examples' own log loss.
SIBLING_WEIGHT = 0.3
SIBLING_PAIRS_PER_CONTEXT = 32  # a seeded sample beyond this (64 solutions to one problem would make 1,024)


def marked(texts: Sequence[str]) -> list[str]:
    """Each text between the start and end words, so that a bigram says how it opens and how it ends."""
    return [f"{TEXT_START} {text} {TEXT_END}" for text in texts]


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


def _count_vectorizer(**kwargs: Any) -> Any:
    from sklearn.feature_extraction.text import CountVectorizer

    return CountVectorizer(ngram_range=(1, 2), binary=True, token_pattern=LEXICAL_TOKENS, dtype=np.float32, **kwargs)


def _tree_columns(x: np.ndarray, words: Any) -> Any:
    from scipy import sparse

    dense = sparse.csr_matrix(x)
    return dense if words is None else sparse.hstack([dense, words]).tocsr()


def example_weights(negative_weight: float | str, y: np.ndarray) -> np.ndarray:
    """Each example's weight in the fit, from the job's ``negative_weight``."""
    from sklearn.utils.class_weight import compute_sample_weight

    return np.asarray(compute_sample_weight(class_weights(negative_weight), y), dtype=np.float64)


def _tree_params(examples: int, seed: int, leaves: int) -> dict[str, Any]:
    return {"objective": "binary", "learning_rate": TREE_LEARNING_RATE, "num_leaves": leaves,
            "min_data_in_leaf": TREE_MIN_CHILD, "bagging_fraction": TREE_ROW_SHARE, "bagging_freq": 1,
            "feature_fraction": TREE_COLUMN_SHARE, "lambda_l2": TREE_L2, "seed": seed,
            "num_threads": 1 if examples < TREE_THREADED_EXAMPLES else 0,  # 0: OpenMP's default, every core
            # the same trees whatever the number of threads
            "deterministic": True, "force_col_wise": True, "verbose": -1}


class BoostedTrees:
    """Gradient-boosted trees (LightGBM) over a lexical head's dense columns and the texts' binary word n-grams
    (those at least ``TREE_MIN_DF`` training texts hold): their log-odds join the logistic regression's."""

    def __init__(self, booster: Any, vocabulary: np.ndarray) -> None:
        self.booster, self.vocabulary = booster, vocabulary
        self._vectorizer: Any = None

    @classmethod
    def fit(cls, x: np.ndarray, texts: Sequence[str], y: np.ndarray, *, sample_weight: np.ndarray,
            seed: int, leaves: int = TREE_LEAVES) -> tuple[BoostedTrees, np.ndarray]:
        """The trees and their log-odds of the training examples (from the columns built for the fit: the texts
        are split into n-grams once). ``x``: the dense columns as built (trees need no standardisation)."""
        import lightgbm

        vectorizer = _count_vectorizer(min_df=TREE_MIN_DF)
        try:
            words = vectorizer.fit_transform(marked(texts))
            vocabulary = np.asarray(vectorizer.get_feature_names_out(), dtype=str)
        except ValueError:  # no n-gram in enough texts: the trees read the dense columns only
            words, vocabulary = None, np.zeros(0, dtype=str)
        columns = _tree_columns(x, words)
        data = lightgbm.Dataset(columns, label=y, weight=sample_weight, params={"verbose": -1})
        booster = lightgbm.train(_tree_params(len(y), seed, leaves), data, num_boost_round=TREE_ROUNDS)
        return cls(booster, vocabulary), np.asarray(booster.predict(columns, raw_score=True), dtype=np.float64)

    def log_odds(self, x: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        words = None
        if self.vocabulary.size:
            if self._vectorizer is None:
                self._vectorizer = _count_vectorizer(vocabulary={str(t): i for i, t in enumerate(self.vocabulary)})
            words = self._vectorizer.transform(marked(texts))
        return np.asarray(self.booster.predict(_tree_columns(x, words), raw_score=True), dtype=np.float64)

    @property
    def parameters(self) -> int:
        """Leaf values and split thresholds."""
        return int(sum(2 * tree["num_leaves"] - 1 for tree in self.booster.dump_model()["tree_info"]))


def _tfidf_vectorizer(tokens: str, **kwargs: Any) -> Any:
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, token_pattern=tokens, dtype=np.float32, **kwargs)


def _design(examples: Any, y: np.ndarray, contexts: Sequence[str] | None, seed: int) -> tuple[Any, np.ndarray, int]:
    """The regression's rows: each example with a column of ones (the intercept), then each sibling pair's
    difference both ways (which the intercept cancels); their labels; the number of pairs."""
    from scipy import sparse

    better, worse = sibling_pairs(contexts, y, seed=seed) if contexts is not None else (np.zeros(0, int),) * 2
    contrast = SIBLING_WEIGHT * (examples[better] - examples[worse])
    no_intercept = sparse.csr_matrix((len(better), 1), dtype=np.float32)
    design = sparse.vstack([sparse.hstack([examples, np.ones((len(y), 1), np.float32)]),
                            sparse.hstack([contrast, no_intercept]),
                            sparse.hstack([-contrast, no_intercept])]).tocsr()
    labels = np.concatenate([y, np.ones(len(better)), np.zeros(len(better))]).astype(np.int64)
    return design, labels, len(better)


def blended(linear: np.ndarray, trees: np.ndarray, tree_weight: float) -> np.ndarray:
    """The log-odds of a regression and of trees, averaged at the trees' share ``tree_weight``."""
    return np.asarray((1.0 - tree_weight) * linear + tree_weight * trees, dtype=np.float64)


class LexicalHead:
    """One logistic regression over the standardised dense columns and the text's word n-grams (unigrams and
    bigrams, TF-IDF with sublinear counts, L2-normalised): P(correct) = sigmoid(w · x' + v · tfidf(text) + b);
    with ``trees`` (``head_model: linear+trees``), the sigmoid of that log-odds averaged with the boosted trees'
    at the trees' share ``tree_weight``. The vocabulary, its IDF weights, the recipe of the dense columns and the
    trees' share are saved with the weights, so scoring builds the same columns and blends them the same way."""

    def __init__(self, mean: np.ndarray, scale: np.ndarray, coef: np.ndarray, vocabulary: np.ndarray,
                 idf: np.ndarray, word_coef: np.ndarray, intercept: float, *, tokens: str = LEXICAL_TOKENS,
                 marks: bool = True, recipe: Recipe = Recipe.LEXICAL, trees: BoostedTrees | None = None,
                 tree_weight: float = TREE_WEIGHT) -> None:
        self.mean, self.scale, self.coef, self.intercept = mean, scale, coef, float(intercept)
        self.vocabulary, self.idf, self.word_coef = vocabulary, idf, word_coef
        self.tokens, self.marks, self.recipe, self.trees = tokens, marks, recipe, trees
        self.tree_weight = float(tree_weight)
        self._vectorizer: Any = None

    @classmethod
    def fit(cls, x: np.ndarray, texts: Sequence[str], y: np.ndarray, *, contexts: Sequence[str] | None = None,
            negative_weight: float | str, iterations: int, seed: int, recipe: Recipe = Recipe.LEXICAL,
            trees: bool = False, regularisation: float = LEXICAL_REGULARISATION, min_df: int = LEXICAL_MIN_DF,
            tree_weight: float = TREE_WEIGHT, tree_leaves: int = TREE_LEAVES) -> tuple[LexicalHead, dict[str, Any]]:
        """``contexts``: each example's context key; examples sharing one with opposite labels are also fitted
        as pairs (``sibling_pairs``). ``recipe``: the lexical recipe that built ``x``, saved with the head;
        ``trees``: boosted trees too (``tree_leaves`` leaves each), on the same examples and class weights
        (``BoostedTrees``), their log-odds at the share ``tree_weight`` of the blend."""
        from scipy import sparse
        from sklearn.linear_model import LogisticRegression

        mean, scale = standardisation(x)
        vectorizer = _tfidf_vectorizer(LEXICAL_TOKENS, min_df=min_df if len(texts) >= LEXICAL_MIN_DF_TEXTS else 1,
                                       max_features=LEXICAL_MAX_NGRAMS)
        try:
            words = vectorizer.fit_transform(marked(texts))
        except ValueError:  # scikit-learn's "empty vocabulary": no text holds a word, a number or an operator
            raise ValueError("the training texts hold no word, number or operator for the lexical head") from None
        examples = sparse.hstack([sparse.csr_matrix((x - mean) / scale), words]).tocsr()
        design, labels, pairs = _design(examples, y, contexts, seed)
        weights = example_weights(negative_weight, y)
        model = LogisticRegression(C=regularisation, fit_intercept=False, max_iter=iterations,
                                   random_state=seed)
        model.fit(design, labels, sample_weight=np.concatenate([weights, np.ones(2 * pairs)]))
        coef = model.coef_[0].astype(np.float32)
        width = x.shape[1]
        boosted, tree_log_odds = (BoostedTrees.fit(x, texts, y, sample_weight=weights, seed=seed, leaves=tree_leaves)
                                  if trees else (None, None))
        head = cls(mean.astype(np.float32), scale.astype(np.float32), coef[:width],
                   np.asarray(vectorizer.get_feature_names_out(), dtype=str), vectorizer.idf_.astype(np.float32),
                   coef[width:-1], float(coef[-1]), recipe=recipe, trees=boosted, tree_weight=tree_weight)
        # the training loss from the columns already built (head.predict would tokenize every text again)
        log_odds = np.asarray(examples @ coef[:-1] + coef[-1], dtype=np.float64)
        if tree_log_odds is not None:
            log_odds = head.blend(log_odds, tree_log_odds)
        fit = {"iterations": int(np.max(model.n_iter_)), "loss": log_loss(y, sigmoid(log_odds)),
               "ngrams": int(head.word_coef.size), "sibling_pairs": pairs}
        if boosted is not None:
            fit.update(trees=int(boosted.booster.num_trees()), tree_ngrams=int(boosted.vocabulary.size))
        return head, fit

    def blend(self, linear: np.ndarray, trees: np.ndarray) -> np.ndarray:
        """The log-odds of the regression and of the trees, averaged at the trees' share ``tree_weight``."""
        return blended(linear, trees, self.tree_weight)

    def _words(self, texts: Sequence[str]) -> Any:
        if self._vectorizer is None:
            vectorizer = _tfidf_vectorizer(self.tokens, vocabulary={str(t): i for i, t in enumerate(self.vocabulary)})
            vectorizer.idf_ = self.idf  # scikit-learn's way to restore a fitted vocabulary's weights
            self._vectorizer = vectorizer
        return self._vectorizer.transform(marked(texts) if self.marks else texts)

    def linear_log_odds(self, x: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """The regression's log-odds alone (the trees left out)."""
        # a step scores the same to the bit alone or in a batch (a tie an AUROC counts stays a tie): in float64,
        # and each row's dense products summed on their own (a matrix product's sums vary with the batch's shape)
        dense = (((x - self.mean) / self.scale).astype(np.float64) * self.coef.astype(np.float64)).sum(axis=1)
        return np.asarray(dense + self._words(texts) @ self.word_coef.astype(np.float64) + self.intercept,
                          dtype=np.float64)

    def predict(self, x: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        z = self.linear_log_odds(x, texts)
        if self.trees is not None:
            z = self.blend(z, self.trees.log_odds(x, texts))
        return sigmoid(z)

    @property
    def parameters(self) -> int:
        return int(self.coef.size + self.word_coef.size + 1) + (self.trees.parameters if self.trees else 0)
