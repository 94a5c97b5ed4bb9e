"""Backbones, heads, the step separator and the saved-model description.

The separator must be one dedicated token that never merges with step text: a BERT/WordPiece
``"\\n"`` encodes to nothing, so labels would silently land on each step's last word piece.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .config import ALL_LINEAR, LoraSettings, TrainingConfigError
from .data import SequenceLayout, tokenize_texts

SPEC_FILE = "steplab_reward_model.json"
SPEC_FORMAT = "steplab-reward-model/1"
ADDED_SEPARATOR = "<steplab_step>"
QWEN_SEPARATOR = "<extra_0>"  # the Qwen2.5-Math-PRM convention
ID2LABEL = {0: "incorrect", 1: "correct"}
POSITIVE_CLASS = 1
# the 2-class heads transformers puts on a backbone (BERT-style, decoder-style); peft trains them in full
HEAD_MODULES = frozenset({"classifier", "score"})


@dataclass(frozen=True)
class ModelSpec:
    """What a scorer needs besides the weights; saved as ``steplab_reward_model.json``."""

    kind: str
    separator_token: str
    aggregation: str
    neutral: str
    base_model: str
    max_length: int
    lora: bool
    num_labels: int = 2
    positive_class: int = POSITIVE_CLASS
    format: str = SPEC_FORMAT
    method: str = "finetune"
    # PRM: the first-error threshold chosen on the validation split (max first-error F1); None: 0.5
    threshold: float | None = None
    features: str | None = None  # head: the step-feature recipe
    feature_cache: str | None = None  # head: the cache folder of training, which scoring reuses
    # how the model reads answer lines (``textfeatures.ANSWER_FORMS``); a model saved before the rewrite: as written
    answers: str = "as written"

    def save(self, folder: Path) -> None:
        (Path(folder) / SPEC_FILE).write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, folder: Path) -> ModelSpec:
        path = Path(folder) / SPEC_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found: {folder} is not a Steplab reward model folder")
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != SPEC_FORMAT:
            raise ValueError(f"{path}: unsupported format {data.get('format')!r}, expected {SPEC_FORMAT!r}")
        return cls(**data)


def load_tokenizer(folder: Path) -> Any:
    """The folder's tokenizer, never fetched from the network; a pad token is guaranteed."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def choose_separator(tokenizer: Any) -> tuple[str, bool]:
    """(token, newly added): ``[SEP]``-style if the tokenizer has one, else ``<extra_0>``, else a new token."""
    if tokenizer.sep_token is not None:
        return str(tokenizer.sep_token), False
    if QWEN_SEPARATOR in tokenizer.get_vocab():
        return QWEN_SEPARATOR, False
    tokenizer.add_special_tokens({"additional_special_tokens": [ADDED_SEPARATOR]})
    return ADDED_SEPARATOR, True


def sequence_layout(tokenizer: Any, separator_token: str) -> SequenceLayout:
    """The tokenizer's own leading special tokens (``[CLS]``, ``<s>`` or none) plus the separator id."""
    separator_id = tokenizer.convert_tokens_to_ids(separator_token)
    if separator_id is None or separator_id == tokenizer.unk_token_id:
        raise ValueError(f"separator {separator_token!r} is not a single token of this tokenizer")
    probe = "x"
    framed = list(tokenizer(probe, add_special_tokens=True)["input_ids"])
    plain = tokenize_texts(tokenizer, [probe])[0]
    start = next((i for i in range(len(framed)) if framed[i:i + len(plain)] == plain), 0)
    return SequenceLayout(prefix_ids=tuple(framed[:start]), separator_id=int(separator_id),
                          pad_id=int(tokenizer.pad_token_id))


def max_positions(folder: Path) -> int | None:
    """The backbone's position limit, when its config states one."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(folder), local_files_only=True)
    value = getattr(config, "max_position_embeddings", None)
    return int(value) if value else None


def reads_later_tokens(model: Any, tokenizer: Any) -> bool:
    """Whether a token head's output at a position changes with a token after it (a bidirectional encoder's
    does; a decoder's does not): two short sequences that differ only in their last token, compared at the
    first position."""
    import torch

    ids = list(tokenizer("one two three four", add_special_tokens=True)["input_ids"])
    other = ids[:-1] + [ids[1] if ids[-1] != ids[1] else ids[2]]
    was_training = model.training
    model.eval()  # dropout would make any two passes differ
    try:
        with torch.no_grad():
            outputs = [model(input_ids=torch.tensor([sequence])).logits for sequence in (ids, other)]
    finally:
        model.train(was_training)
    # a token head's logits are (sequence, position, class): the first position of each
    return not torch.allclose(outputs[0][0, 0], outputs[1][0, 0], atol=1e-6)


def build_model(kind: str, folder: Path, tokenizer: Any, *, resize: bool, lora: LoraSettings | None) -> Any:
    """A 2-class token head (PRM) or sequence head (ORM) on the backbone, fp32, optionally LoRA-wrapped. A PRM
    attends causally: each step's score reads the problem and the steps up to it, never the steps after it."""
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoModelForTokenClassification

    auto = AutoModelForTokenClassification if kind == "prm" else AutoModelForSequenceClassification
    refusal = TrainingConfigError(
        f"config key 'base_model' is {str(folder)!r}, whose attention reads every token in both directions and has "
        "no causal mode: a PRM's step scores would see the steps after them. Choose a decoder or a BERT-style "
        "encoder", key="base_model")

    def load(*, causal: bool) -> Any:
        config = AutoConfig.from_pretrained(str(folder), num_labels=2, id2label=ID2LABEL,
                                            label2id={v: k for k, v in ID2LABEL.items()}, local_files_only=True)
        if causal:
            if not hasattr(config, "is_decoder"):
                raise refusal
            config.is_decoder, config.use_cache = True, False
        return auto.from_pretrained(str(folder), config=config, dtype=torch.float32, local_files_only=True)

    model = load(causal=False)
    if kind == "prm" and reads_later_tokens(model, tokenizer):
        # A bidirectional encoder (BERT, MiniLM) would let a step's label see the steps after it. An
        # ``alternatives`` row ends at its rated alternative, so "this is the last step" alone predicts -1: on the
        # demo's labels MiniLM fine-tuned so scored a validation step AUROC of 0.965 on rows built the same way, a
        # figure about the rows' shape, not the steps. Its own decoder mode (saved in its config, so scoring
        # attends the same way) makes it read each step as a decoder PRM does.
        model = load(causal=True)
        if reads_later_tokens(model, tokenizer):
            raise refusal
    if resize:
        model.resize_token_embeddings(len(tokenizer))
        _start_added_separator_at_mean(model, len(tokenizer))
    model.config.pad_token_id = tokenizer.pad_token_id  # decoders pick the last non-pad token for ORM pooling
    if lora is None:
        return model
    from peft import LoraConfig, TaskType, get_peft_model

    peft_config = LoraConfig(
        task_type=TaskType.TOKEN_CLS if kind == "prm" else TaskType.SEQ_CLS,
        # peft annotates lora_alpha as int but only divides by it (alpha / r): a fractional alpha is meant.
        r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,  # type: ignore[arg-type]
        target_modules=_lora_targets(model, lora.target_modules),
    )
    return get_peft_model(model, peft_config)


def _start_added_separator_at_mean(model: Any, vocabulary: int) -> None:
    """The added separator (the tokenizer's last id) starts at the mean embedding: a row a decoder's padded matrix
    already had (Qwen's) was never trained, and under LoRA the embeddings stay frozen, so it would stay there."""
    import torch

    weight = model.get_input_embeddings().weight
    with torch.no_grad():
        weight[vocabulary - 1] = weight[:vocabulary - 1].mean(dim=0)


def _lora_targets(model: Any, targets: tuple[str, ...] | str | None) -> list[str] | None:
    """The module names LoRA adapts; "all-linear" = every linear layer of the backbone. peft's own "all-linear"
    also takes the 2-class head, which a token or sequence head already trains in full, and then refuses it."""
    import torch

    if targets != ALL_LINEAR:
        return list(targets) if targets else None
    return sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules()
                   if isinstance(module, torch.nn.Linear) and name.rsplit(".", 1)[-1] not in HEAD_MODULES})


def save_reward_model(model: Any, tokenizer: Any, spec: ModelSpec, folder: Path) -> None:
    """Save a plain model (LoRA merged in) as safetensors, with tokenizer and spec, loadable without peft."""
    if spec.lora:
        model = model.merge_and_unload()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(folder), safe_serialization=True)
    tokenizer.save_pretrained(str(folder))
    spec.save(folder)


def load_model(folder: Path, kind: str) -> Any:
    """A saved reward model in eval mode."""
    from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification

    auto = AutoModelForTokenClassification if kind == "prm" else AutoModelForSequenceClassification
    model = auto.from_pretrained(str(folder), local_files_only=True)
    model.eval()
    return model
