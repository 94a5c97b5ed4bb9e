"""Monte-Carlo estimates: the share of continuations sampled from a step's prefix that reach the answer."""
from . import LabelSource, register


def _closeness_to_half(value: float) -> float:
    """1 at 0.5, 0 at 0 or 1: how far the rollouts are from settling the step."""
    return 1 - abs(2 * value - 1)


MC = register(LabelSource(
    name="mc", label="Monte-Carlo estimate (share of sampled continuations that reach the answer)",
    # Math-Shepherd's hard estimate: a step is correct when any sampled continuation reached the answer
    correct_from=0.0, strict=True, uncertainty=_closeness_to_half))
