"""Frozen-backbone text features, computed once and cached on disk (the ``head`` method's input).

Every distinct text (a problem, a step) is encoded once by the frozen backbone (mean of its last hidden states,
L2-normalised: the sentence-embedding recipe MiniLM was trained for) and kept in a cache folder keyed by the
backbone, the token limit and the text's SHA-256. A PRM's step features and an ORM's solution features are both
built from these vectors, so PRM and ORM training on one dataset version, and the scoring that follows, share
the cache: whichever comes first encodes, the others read. A file lock makes two concurrent jobs (the PRM and
the ORM of one comparison) encode each text once.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .data import pad_batch
from .modeling import load_tokenizer

#: tokens per encoder batch: sorted by length, short steps go many to a batch, long problems few
BATCH_TOKENS = 8192
FEATURE_VERSION = "mean-l2/1"


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def cache_folder(root: Path, backbone: Path, max_length: int) -> Path:
    """One sub-folder per (backbone weights' config, token limit, feature recipe)."""
    config = (backbone / "config.json").read_bytes() if (backbone / "config.json").is_file() else b""
    digest = hashlib.sha256(str(backbone.resolve()).encode() + config + f"{max_length}{FEATURE_VERSION}".encode())
    return Path(root) / f"{backbone.name}-{max_length}-{digest.hexdigest()[:12]}"


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class FeatureCache:
    """Text vectors of one backbone, read from and added to a folder of ``part-*.npz`` files."""

    def __init__(self, folder: Path, backbone: Path, max_length: int, *, threads: int | None = None) -> None:
        self.folder = cache_folder(folder, backbone, max_length)
        self.backbone = backbone
        self.max_length = max_length
        self.threads = threads
        self.vectors: dict[bytes, np.ndarray] = {}
        self.parts: set[str] = set()
        self.computed = 0  # texts this process encoded (the rest came from the cache)
        self._encoder: tuple[Any, Any] | None = None

    def _read_parts(self) -> None:
        for path in sorted(self.folder.glob("part-*.npz")):
            if path.name in self.parts:
                continue
            with np.load(path) as data:
                keys, vectors = data["keys"], data["vectors"]
            for key, vector in zip(keys, vectors, strict=True):  # raw bytes: a NUL-ending hash stays whole
                self.vectors[key.tobytes()] = vector
            self.parts.add(path.name)

    def ensure(self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None) -> None:
        """Encode the texts the cache does not hold yet (under the folder's lock) and store them."""
        with _locked(self.folder):
            self._read_parts()
            missing: dict[bytes, str] = {}
            for text in texts:
                key = text_key(text)
                if key not in self.vectors:
                    missing.setdefault(key, text)
            if not missing:
                return
            keys = list(missing)
            vectors = self._encode([missing[k] for k in keys], progress)
            name = f"part-{uuid.uuid4().hex}.npz"
            temporary = self.folder / f".{name}.tmp.npz"
            np.savez(temporary, keys=np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(-1, 32),
                     vectors=vectors)
            os.replace(temporary, self.folder / name)
            self.parts.add(name)
            for key, vector in zip(keys, vectors, strict=True):
                self.vectors[key] = vector
            self.computed += len(keys)

    def get(self, text: str) -> np.ndarray:
        return self.vectors[text_key(text)]

    @property
    def dim(self) -> int:
        return int(next(iter(self.vectors.values())).shape[0]) if self.vectors else 0

    def _load_encoder(self) -> tuple[Any, Any]:
        if self._encoder is None:
            import torch
            from transformers import AutoModel

            if self.threads:
                torch.set_num_threads(self.threads)
            model = AutoModel.from_pretrained(str(self.backbone), local_files_only=True, dtype=torch.float32)
            device = "cuda" if torch.cuda.is_available() else "cpu"
            self._encoder = (load_tokenizer(self.backbone), model.to(device).eval())
        return self._encoder

    def _encode(self, texts: list[str], progress: Callable[[int, int], None] | None) -> np.ndarray:
        """Mean-pooled, L2-normalised last hidden states, in batches of similar length."""
        import torch

        tokenizer, model = self._load_encoder()
        ids = list(tokenizer(texts, truncation=True, max_length=self.max_length, verbose=False)["input_ids"])
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = np.zeros((len(ids), model.config.hidden_size), dtype=np.float32)
        device = next(model.parameters()).device
        done, start = 0, 0
        with torch.inference_mode():
            while start < len(order):
                end = start + 1  # ascending lengths: the batch's last text is its widest
                while end < len(order) and (end - start + 1) * len(ids[order[end]]) <= BATCH_TOKENS:
                    end += 1
                chunk = order[start:end]
                batch = pad_batch([{"input_ids": ids[i]} for i in chunk], int(tokenizer.pad_token_id))
                mask = batch["attention_mask"].to(device)
                hidden = model(input_ids=batch["input_ids"].to(device), attention_mask=mask).last_hidden_state
                pooled = (hidden * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
                pooled = torch.nn.functional.normalize(pooled.float(), dim=-1).cpu().numpy()
                out[chunk] = pooled
                start += len(chunk)
                done += len(chunk)
                if progress is not None:
                    progress(done, len(ids))
        return out
