"""Machine-label source kinds, one module per kind, behind one registry.

A machine label's source is a kind and a name (``mc:smollm2``, ``llm:qwen@judge-v1``). The kind decides how its
value in [0, 1] reads as a hard label (``says_correct``), how uncertain it is (the "disagreement first" lease
order), and its title on pages. Its readers: ``MachineLabel``'s choices, ``annotate.services.machine_labels``,
the suggestions shown to labelers, agreement with humans per source and the consensus export
(``rewards.consensus``). Adding a kind is one module in this package that calls ``register``; none of the
readers changes.

Plain Python: Django-free code may import it.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import import_module
from pkgutil import iter_modules


@dataclass(frozen=True)
class LabelSource:
    """What a kind of machine label is and how its values read."""

    #: its stored value (``MachineLabel.kind``, at most 8 characters) and the prefix of its source keys
    name: str
    #: its title in choices and on pages
    label: str
    #: the value from which a step counts as correct (a Monte-Carlo estimate: any continuation reached the answer)
    correct_from: float = 0.5
    #: whether ``correct_from`` itself is still "wrong" (Monte-Carlo: 0 of K continuations is wrong, anything above
    #: is correct)
    strict: bool = False
    #: how unsure a value is, 0–1 (the lease order's "disagreement first" adds the least certain step's); None: the
    #: kind's values are not estimates
    uncertainty: Callable[[float], float] | None = None

    def says_correct(self, value: float) -> bool:
        return value > self.correct_from if self.strict else value >= self.correct_from


MAX_NAME_CHARS = 8  # the width of MachineLabel.kind
_KINDS: dict[str, LabelSource] = {}
_loaded = False


def register(kind: LabelSource) -> LabelSource:
    """Add a kind (its name unused so far); the kind as registered."""
    if not kind.name or len(kind.name) > MAX_NAME_CHARS or ":" in kind.name:
        raise ValueError(f"a label-source kind needs a name of 1–{MAX_NAME_CHARS} characters without ':', "
                         f"got {kind.name!r}")
    if kind.name in _KINDS:
        raise ValueError(f"label-source kind {kind.name!r} is registered already")
    _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a kind (a test's own kind, once it is done)."""
    _KINDS.pop(name, None)


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in iter_modules(__path__):
            import_module(f"{__name__}.{module.name}")


def kinds() -> Iterator[LabelSource]:
    """Every registered kind, in registration order."""
    _load()
    return iter(list(_KINDS.values()))


def names() -> list[str]:
    return [kind.name for kind in kinds()]


def get(name: str) -> LabelSource:
    """The kind called ``name``; ValueError naming the known ones for any other."""
    _load()
    kind = _KINDS.get(name)
    if kind is None:
        raise ValueError(f"kind must be one of {', '.join(_KINDS)}, got {name!r}")
    return kind


def choices() -> list[tuple[str, str]]:
    """(name, label) of every kind: ``MachineLabel.kind``'s choices."""
    return [(kind.name, kind.label) for kind in kinds()]


def says_correct(kind: str, value: float) -> bool:
    """A source's hard label of a step; a kind no longer registered reads as a probability (correct from 0.5)."""
    _load()
    known = _KINDS.get(kind)
    return known.says_correct(value) if known is not None else value >= 0.5


def uncertainty(kind: str, value: float) -> float:
    """How unsure a value of ``kind`` is (0 for kinds whose values are not estimates)."""
    _load()
    known = _KINDS.get(kind)
    return known.uncertainty(value) if known is not None and known.uncertainty is not None else 0.0


def source_key(kind: str, source: str) -> str:
    return f"{kind}:{source}"


def kind_of(key: str) -> str:
    """The kind of a source key (``llm:qwen@judge-v1`` → ``llm``)."""
    return key.split(":", 1)[0]
