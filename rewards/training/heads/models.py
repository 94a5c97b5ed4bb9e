"""The heads over vector columns: a logistic regression (``LinearHead``) and a one-hidden-layer MLP
(``MlpHead``); both standardise their columns first. Their arrays are saved by ``persistence``."""
from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

#: iterations of the head's optimizer when the job gives no ``max_steps`` (L-BFGS converges well before)
DEFAULT_ITERATIONS = 300
#: inverse L2 strength where the job does not choose one (``tuning`` chooses it on the training problems)
REGULARISATION = 0.5
# the MLP head (docs/training-methods.md); its width and dropout where the job does not choose (``tuning``)
MLP_HIDDEN = 256
MLP_DROPOUT = 0.3
MLP_INPUT_DROPOUT = 0.1
MLP_LEARNING_RATE = 1e-3
MLP_WEIGHT_DECAY = 1e-2
MLP_BATCH = 512
MLP_MAX_EPOCHS = 40
MLP_PATIENCE = 3  # epochs without a better held-aside loss before stopping


def standardisation(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each column's mean and scale (a constant column keeps scale 1)."""
    scale = x.std(axis=0)
    scale[scale < 1e-6] = 1.0
    return x.mean(axis=0), scale


def class_weights(negative_weight: float | str) -> Any:
    """scikit-learn's ``class_weight`` for the job's ``negative_weight``."""
    return "balanced" if negative_weight == "balanced" else {0: float(negative_weight), 1: 1.0}


def log_loss(y: np.ndarray, probs: np.ndarray) -> float:
    """The mean log loss of P(correct) against the labels (probabilities clipped away from 0 and 1)."""
    clipped = np.clip(probs, 1e-7, 1 - 1e-7)
    return float(-np.mean(y * np.log(clipped) + (1 - y) * np.log(1 - clipped)))


def sigmoid(z: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-z)), dtype=np.float64)


class LinearHead:
    """Standardise, then logistic regression: P(correct) = sigmoid(w · (x − mean) / scale + b)."""

    def __init__(self, mean: np.ndarray, scale: np.ndarray, coef: np.ndarray, intercept: float) -> None:
        self.mean, self.scale, self.coef, self.intercept = mean, scale, coef, float(intercept)

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray, *, negative_weight: float | str, iterations: int,
            seed: int, regularisation: float = REGULARISATION) -> tuple[LinearHead, dict[str, Any]]:
        from sklearn.linear_model import LogisticRegression

        mean, scale = standardisation(x)
        model = LogisticRegression(C=regularisation, class_weight=class_weights(negative_weight),
                                   max_iter=iterations, random_state=seed)
        model.fit((x - mean) / scale, y)
        head = cls(mean.astype(np.float32), scale.astype(np.float32), model.coef_[0].astype(np.float32),
                   float(model.intercept_[0]))
        return head, {"iterations": int(np.max(model.n_iter_)), "loss": log_loss(y, head.predict(x))}

    def predict(self, x: np.ndarray) -> np.ndarray:
        return sigmoid(((x - self.mean) / self.scale) @ self.coef + self.intercept)

    @property
    def parameters(self) -> int:
        return int(self.coef.size + 1)


def held_aside(group: str, seed: int) -> bool:
    """A tenth of the training problems, for the MLP's early stopping (not the job's validation split)."""
    return int(hashlib.sha256(f"head:{seed}:{group}".encode()).hexdigest()[:8], 16) % 10 == 0


def _held_mask(groups: np.ndarray, seed: int, size: int) -> np.ndarray:
    held = np.array([held_aside(str(g), seed) for g in groups], dtype=bool)
    if held.all() or not held.any():  # few problems: every tenth example instead
        held = np.arange(size) % 10 == 0
    return held


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
            iterations: int, seed: int, hidden: int = MLP_HIDDEN,
            dropout: float = MLP_DROPOUT) -> tuple[MlpHead, dict[str, Any]]:
        """``groups``: each example's problem (the early-stopping split keeps a problem's steps on one side);
        ``iterations``: the most epochs; ``hidden``: the hidden layer's width, ``dropout`` after it."""
        import torch

        torch.manual_seed(seed)
        mean, scale = standardisation(x)
        held = _held_mask(groups, seed, len(y))
        negatives = max(int((y == 0).sum()), 1)
        weight0 = (y.size - negatives) / negatives if negative_weight == "balanced" else float(negative_weight)
        xs = torch.from_numpy(((x - mean) / scale).astype(np.float32))
        ys = torch.from_numpy(y.astype(np.float32))
        ws = torch.where(ys > 0.5, 1.0, weight0)
        net = torch.nn.Sequential(torch.nn.Dropout(MLP_INPUT_DROPOUT), torch.nn.Linear(x.shape[1], hidden),
                                  torch.nn.ReLU(), torch.nn.Dropout(dropout), torch.nn.Linear(hidden, 1))
        split = torch.from_numpy(np.flatnonzero(~held)), torch.from_numpy(np.flatnonzero(held))
        best_loss, best_epoch, best = _train_mlp(net, xs, ys, ws, *split, min(iterations, MLP_MAX_EPOCHS))
        hidden_weight, hidden_bias, coef, intercept = (t.numpy() for t in best)
        head = cls(mean.astype(np.float32), scale.astype(np.float32), hidden_weight.T.astype(np.float32),
                   hidden_bias.astype(np.float32), coef[0].astype(np.float32), float(intercept[0]))
        return head, {"iterations": best_epoch + 1, "loss": log_loss(y, head.predict(x)),
                      "early_stopping_loss": best_loss}

    def predict(self, x: np.ndarray) -> np.ndarray:
        hidden = np.maximum(((x - self.mean) / self.scale) @ self.hidden_weight + self.hidden_bias, 0.0)
        return sigmoid(hidden @ self.coef + self.intercept)

    @property
    def parameters(self) -> int:
        return int(self.hidden_weight.size + self.hidden_bias.size + self.coef.size + 1)


def _train_mlp(net: Any, xs: Any, ys: Any, ws: Any, train_index: Any, held_index: Any,
               epochs: int) -> tuple[float, int, list[Any]]:
    """AdamW epochs until the held-aside loss stops improving: (best loss, its epoch, its parameters)."""
    import torch

    optimizer = torch.optim.AdamW(net.parameters(), lr=MLP_LEARNING_RATE, weight_decay=MLP_WEIGHT_DECAY)
    loss_of = torch.nn.functional.binary_cross_entropy_with_logits
    best: tuple[float, int, list[Any]] = (float("inf"), -1, [])
    for epoch in range(epochs):
        net.train()
        order = train_index[torch.randperm(train_index.numel())]
        for start in range(0, order.numel(), MLP_BATCH):
            batch = order[start:start + MLP_BATCH]
            optimizer.zero_grad()
            loss_of(net(xs[batch]).squeeze(-1), ys[batch], weight=ws[batch]).backward()
            optimizer.step()
        net.eval()
        with torch.inference_mode():
            held_loss = float(loss_of(net(xs[held_index]).squeeze(-1), ys[held_index], weight=ws[held_index]))
        if held_loss < best[0]:
            best = (held_loss, epoch, [p.detach().clone() for p in net.parameters()])
        elif epoch - best[1] >= MLP_PATIENCE:
            break
    return best
