"""The ``head`` method: a small classifier trained on every label, over a frozen backbone's cached features.

Full fine-tuning reads every token of every labeled path once per epoch through the whole encoder: on two CPU
cores a budget of minutes reaches a few hundred of a dataset version's tens of thousands of paths. Here each
distinct text is encoded once (``features.FeatureCache``) and a logistic regression learns from all the labels
in seconds. A PRM scores step k of a solution from the step, the step before it and the problem (their vectors,
element-wise products and cosines, and the step's position); an ORM scores a solution from the problem, the mean
of its steps and its last step. Both read the same cached vectors, so they see the same backbone.

The head is saved as plain arrays (``head.npz``: standardisation and weights), no pickle; the backbone is not
copied, the spec names it.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .config import TrainConfig, default_model_path
from .data import IGNORE_INDEX, OrmRow, PrmRow, read_dataset, split_rows
from .features import FeatureCache
from .textfeatures import NAMES as TEXT_NAMES
from .textfeatures import steps_text_features

HEAD_FILE = "head.npz"
FEATURES = ("context", "step", "context+text")
#: iterations of the head's optimizer when the job gives no ``max_steps`` (L-BFGS converges well before)
DEFAULT_ITERATIONS = 300
REGULARISATION = 0.5  # inverse L2 strength of the logistic regression, measured on ProcessBench (README)
# the MLP head (README "Methods" gives the measurements behind these)
MLP_HIDDEN = 256
MLP_DROPOUT = 0.3
MLP_INPUT_DROPOUT = 0.1
MLP_LEARNING_RATE = 1e-3
MLP_WEIGHT_DECAY = 1e-2
MLP_BATCH = 512
MLP_MAX_EPOCHS = 40
MLP_PATIENCE = 3  # epochs without a better held-aside loss before stopping


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray((a * b).sum(axis=-1, keepdims=True), dtype=np.float32)  # the vectors are unit length


def _with_text(recipe: str) -> bool:
    return recipe.endswith("+text")


def step_features(cache: FeatureCache, prompt: str, steps: Sequence[str], recipe: str) -> np.ndarray:
    """One row per step: what the PRM head reads. ``+text`` adds the step's own text features and whether an
    earlier step already failed the arithmetic check (``textfeatures``); the position is the step's index, never
    its share of the solution (a labeled row that ends at a rated alternative would teach "the last step is
    wrong", which no unlabeled solution tells)."""
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
        wrong = text[:, TEXT_NAMES.index("any_wrong")]
        earlier = np.concatenate([[0.0], np.maximum.accumulate(wrong)[:-1]]).astype(np.float32)[:, None]
        columns += [text, earlier]
    return np.hstack(columns)


def solution_features(cache: FeatureCache, prompt: str, steps: Sequence[str], recipe: str = "context") -> np.ndarray:
    """One row per solution: what the ORM head reads. ``+text``: the steps' text features too (their mean, and
    the most wrong equalities in one step), the same evidence the PRM gets."""
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

        mean = x.mean(axis=0)
        scale = x.std(axis=0)
        scale[scale < 1e-6] = 1.0
        weights: Any = "balanced" if negative_weight == "balanced" else {0: float(negative_weight), 1: 1.0}
        model = LogisticRegression(C=REGULARISATION, class_weight=weights, max_iter=iterations, random_state=seed)
        model.fit((x - mean) / scale, y)
        head = cls(mean.astype(np.float32), scale.astype(np.float32), model.coef_[0].astype(np.float32),
                   float(model.intercept_[0]))
        probs = np.clip(head.predict(x), 1e-7, 1 - 1e-7)
        loss = float(-np.mean(y * np.log(probs) + (1 - y) * np.log(1 - probs)))
        return head, {"iterations": int(np.max(model.n_iter_)), "loss": loss}

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
        mean = x.mean(axis=0)
        scale = x.std(axis=0)
        scale[scale < 1e-6] = 1.0
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
        probs = np.clip(head.predict(x), 1e-7, 1 - 1e-7)
        loss_all = float(-np.mean(y * np.log(probs) + (1 - y) * np.log(1 - probs)))
        return head, {"iterations": best[1] + 1, "loss": loss_all, "early_stopping_loss": best[0]}

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


Head = LinearHead | MlpHead


def load_head(folder: Path) -> Head:
    """The saved head, linear or MLP (an MLP's file holds its hidden layer)."""
    with np.load(folder / HEAD_FILE) as data:
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


def prm_examples(cache: FeatureCache, rows: Sequence[PrmRow],
                 recipe: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features, labels, problems) of every labeled step (neutral-excluded and repeated ones left out)."""
    xs: list[np.ndarray] = []
    ys: list[int] = []
    groups: list[str] = []
    for row in rows:
        keep = [i for i, label in enumerate(row.labels) if label != IGNORE_INDEX]
        if keep:
            xs.append(step_features(cache, row.prompt, row.steps, recipe)[keep])
            ys.extend(row.labels[i] for i in keep)
            groups.extend([_problem(row)] * len(keep))
    width = len(step_features(cache, rows[0].prompt, rows[0].steps[:1], recipe)[0]) if rows else 0
    return ((np.vstack(xs) if xs else np.zeros((0, width), np.float32)), np.array(ys, dtype=np.int64),
            np.array(groups, dtype=object))


def orm_examples(cache: FeatureCache, rows: Sequence[OrmRow],
                 recipe: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features, labels, problems) of every solution."""
    if not rows:
        return np.zeros((0, 0), np.float32), np.zeros(0, np.int64), np.zeros(0, dtype=object)
    return (np.stack([solution_features(cache, r.prompt, orm_steps(r.completion), recipe) for r in rows]),
            np.array([r.label for r in rows], dtype=np.int64), np.array([_problem(r) for r in rows], dtype=object))


def fit_head(model: str, x: np.ndarray, y: np.ndarray, groups: np.ndarray, *, negative_weight: float | str,
             iterations: int | None, seed: int) -> tuple[Head, dict[str, Any]]:
    """The configured classifier fitted; ``iterations``: the optimizer's (linear) or the most epochs (MLP)."""
    if model == "mlp":
        return MlpHead.fit(x, y, groups, negative_weight=negative_weight, iterations=iterations or MLP_MAX_EPOCHS,
                           seed=seed)
    return LinearHead.fit(x, y, negative_weight=negative_weight, iterations=iterations or DEFAULT_ITERATIONS,
                          seed=seed)


def validation_figures(kind: str, head: Head, cache: FeatureCache, rows: Sequence[Any],
                       recipe: str, aggregation: str) -> dict[str, Any] | None:
    """The same figures as fine-tuning reports, plus (PRM) the calibrated first-error threshold."""
    from ..evaluation.step_metrics import calibrate_threshold
    from .scoring import aggregate
    from .train import binary_figures

    if not rows:
        return None
    if kind == "orm":
        x, y, _ = orm_examples(cache, rows, recipe)
        return {"solution_level": binary_figures(head.predict(x), y)}
    step_scores, step_truth, solution_scores, solution_truth = [], [], [], []
    per_row: list[list[float]] = []
    first_errors: list[int] = []
    for row in rows:
        scores = head.predict(step_features(cache, row.prompt, row.steps, recipe))
        labeled = [(float(s), int(lab)) for s, lab in zip(scores, row.labels, strict=True) if lab != IGNORE_INDEX]
        if not labeled:
            continue
        step_scores += [s for s, _ in labeled]
        step_truth += [lab for _, lab in labeled]
        solution_scores.append(aggregate([s for s, _ in labeled], aggregation))
        solution_truth.append(int(all(lab for _, lab in labeled)))
        per_row.append([s for s, _ in labeled])
        first_errors.append(next((i for i, (_, lab) in enumerate(labeled) if lab == 0), -1))
    figures: dict[str, Any] = {
        "step_level": binary_figures(np.array(step_scores), np.array(step_truth)),
        "solution_level": binary_figures(np.array(solution_scores), np.array(solution_truth)),
    }
    figures.update(calibrate_threshold(first_errors, per_row))
    return figures


def run_head_training(config: TrainConfig, events: Any, started: float) -> dict[str, Any]:
    """Read, encode (cached), fit, validate, save; returns ``metrics.json``'s content."""
    from .modeling import ModelSpec
    from .train import dedupe_step_labels

    rows = read_dataset(config.dataset, config.kind, config.neutral)
    if not rows:
        raise ValueError(f"{config.dataset}: the {config.kind.upper()} dataset has no rows: nothing to train on")
    train_rows, eval_rows = split_rows(rows, config.eval_fraction, config.seed)
    if config.limit is not None:
        train_rows = train_rows[:config.limit]
    if not train_rows:
        raise ValueError(f"{config.dataset}: no training rows")
    cache_root = config.feature_cache or config.dataset.parent / "features"
    cache = FeatureCache(cache_root, config.base_model_path, config.max_length)
    encode_started = time.time()
    texts = texts_of(list(train_rows) + list(eval_rows))

    reported = [0]

    def progress(done: int, total: int) -> None:  # a "features" event every 2,048 texts encoded, and the last
        if done == total or done - reported[0] >= 2048:
            reported[0] = done
            events.write("features", done=done, total=total)

    cache.ensure(texts, progress)
    encode_s = time.time() - encode_started
    events.write("features", computed=cache.computed, texts=len(set(texts)), cache=str(cache.folder),
                 seconds=round(encode_s, 1))
    recipe = config.head_features
    repeated = 0
    if config.kind == "prm":
        if config.dedupe_steps:
            train_rows, repeated = dedupe_step_labels(train_rows)
        x, y, groups = prm_examples(cache, train_rows, recipe)
    else:
        x, y, groups = orm_examples(cache, train_rows, recipe)
    if len(np.unique(y)) < 2:
        raise ValueError(f"{config.dataset}: the training labels are all "
                         f"{'correct' if y.size and y[0] else 'incorrect'}: a classifier needs both")
    counts = {"rows": len(train_rows), "rows_used": len(train_rows), "steps": int(y.size),
              "positive_steps" if config.kind == "prm" else "positive": int(y.sum()),
              "negative_steps" if config.kind == "prm" else "negative": int(y.size - y.sum()),
              "repeated_steps": repeated, "overlong": 0}
    events.write("data", train=counts, eval={"rows": len(eval_rows)}, overlong=0)
    fit_started = time.time()
    head, fit = fit_head(config.head_model, x, y, groups, negative_weight=config.negative_weight,
                         iterations=config.max_steps, seed=config.seed)
    fit_s = time.time() - fit_started
    events.write("log", step=fit["iterations"], loss=fit["loss"], learning_rate=None, epoch=1.0,
                 examples_per_s=round(y.size / max(fit_s, 1e-9), 1))
    validation = validation_figures(config.kind, head, cache, eval_rows, recipe, config.score_aggregation)
    if validation is not None:
        events.write("eval", step=fit["iterations"], **validation)
    output = config.output_dir
    output.mkdir(parents=True, exist_ok=True)
    head.save(output)
    threshold = (validation or {}).get("threshold")
    ModelSpec(kind=config.kind, separator_token="", aggregation=config.score_aggregation, neutral=config.neutral,
              base_model=str(config.base_model_path), max_length=config.max_length, lora=False, method="head",
              threshold=threshold, features=recipe, feature_cache=str(Path(cache_root).resolve())).save(output)
    runtime = time.time() - started
    metrics = {
        "kind": config.kind, "method": "head",
        "train": {"loss": fit["loss"], "steps": fit["iterations"], "epochs": 1.0, "runtime_s": fit_s,
                  "examples_per_s": y.size / max(fit_s, 1e-9), "tokens": 0, "tokens_per_s": None,
                  "global_batch_size": int(y.size), "negative_weight": config.negative_weight,
                  "features_s": encode_s},
        "validation": validation,
        "data": {"train": counts, "validation": {"rows": len(eval_rows), "rows_used": len(eval_rows)},
                 "overlong": 0,
                 "features": {"texts": len(set(texts)), "computed": cache.computed, "cache": str(cache.folder)}},
        "model": {"parameters": head.parameters, "trainable_parameters": head.parameters, "method": "head",
                  "features": recipe, "head": config.head_model, "backbone": str(config.base_model_path),
                  "lora": False},
        "world_size": 1,
        "runtime_s": runtime,
    }
    (output / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    events.write("done", model_dir=str(output), train_loss=fit["loss"], runtime_s=runtime)
    return metrics


class HeadScorer:
    """Scores with a saved head: features from the shared cache (texts it lacks are encoded and added)."""

    def __init__(self, folder: Path, spec: Any, *, cache_root: Path | None = None) -> None:
        self.spec = spec
        self.head = load_head(folder)
        root = cache_root or (Path(spec.feature_cache) if spec.feature_cache else folder / "features")
        self.cache = FeatureCache(root, backbone_folder(spec.base_model, None), spec.max_length)

    def steps(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[list[float]]:
        self.cache.ensure([t for prompt, steps in items for t in (prompt, *steps)])
        return [[float(p) for p in self.head.predict(step_features(self.cache, prompt, steps,
                                                                     self.spec.features or "context"))]
                for prompt, steps in items]

    def solutions(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[float]:
        self.cache.ensure([t for prompt, steps in items for t in (prompt, *steps)])
        x = np.stack([solution_features(self.cache, prompt, steps, self.spec.features or "context")
                      for prompt, steps in items])
        return [float(p) for p in self.head.predict(x)]


def resolved_method(method: str) -> str:
    """``auto``: the head on a CPU, fine-tuning where CUDA is present."""
    if method != "auto":
        return method
    import torch

    return "finetune" if torch.cuda.is_available() else "head"

