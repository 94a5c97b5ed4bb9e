"""A symbolic reading of a solution's steps, in order: which equalities hold once the variables bound earlier are
substituted, and which numbers come from nowhere.

* **Bindings**: ``x = <expression>`` (a single letter, ``x_1``, or a Greek name such as ``\\alpha``; "let n = 12",
  ``x=3, y=4``, LaTeX ``$x = \\frac{1}{2}$``) whose right side evaluates once the names bound before are
  substituted binds the name to that value, in the problem and in each step; a later binding replaces it. A
  name bound to two values in one text ("x = 2 or x = 3"), or named in an equation to solve (a name on both
  sides, or a text that says "solve", "if", "when", "or", ...: ``_UNKNOWNS``) is unbound after that text.
* **Bound equalities**: every other ``a = b`` whose sides hold only numbers and bound names (implicit products
  ``2x``, ``3(x+1)``, powers ``x^2``, ``\\frac{x}{2}``, ``\\cdot``, ``\\times``, ``\\sqrt``) is evaluated with
  substitution: checked, and wrong where the sides differ beyond the rounding the text shows (a name bound to
  a decimal, which may be rounded, lets its equalities off by ``ROUNDED_TOLERANCE``).
* **Numbers from nowhere**: a number in a step that the problem and the earlier steps never wrote, that is no
  bound value nor a side of an equality evaluated in this step, nor one operation (+ − × ÷, a square or a square
  root) of two recent known numbers (the last ``POOL`` of them, the step's own and 2; never 0 or 1). ``GIVEN``
  constants need no source.

Conservative throughout: what does not parse is unchecked, never wrong (a false alarm costs more than a miss).
Time is bounded without signals (so it runs in any thread) by a budget of work counted inside the evaluator and the
number search (an atom evaluated, an equality or a number read: one unit; the one-operation search:
``DERIVATION_COST``), ``STEP_BUDGET`` per step and ``SOLUTION_BUDGET`` per solution; past it the rest is unchecked.
Counted, not timed: a text gets the same columns on an idle and on a loaded machine, so a head scores exactly the
columns it was trained on (a clock made them depend on the load). Pure Python and numpy: ``rewards.training``
stays free of Django.
"""
from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

#: column names, in the order ``symbolic_features`` returns them
NAMES = ("bound_checked", "bound_wrong", "unfounded_numbers", "unfounded_share")
#: units of work, a few microseconds each (ProcessBench's 8,587 steps spend at most 388 a step, 1,696 a solution)
STEP_BUDGET = 2_000
SOLUTION_BUDGET = 20_000
DERIVATION_COST = 50  # the one-operation search over the pool, vectorised, in those units
POOL = 40  # the most recent known numbers that the one-operation search combines
MAX_SIDE_TOKENS = 80  # a longer side is prose or a formula too large to be worth the budget
MAX_TEXT = 4000  # characters of a step read; the rest is unchecked
MAX_POWER = 64
MAX_BASE = 1e6
ROUNDED_TOLERANCE = 0.01  # relative: how far an equality over a name bound to a rounded decimal may be off
GIVEN = frozenset({0.0, 1.0, 2.0, 100.0})  # constants no step has to justify (halves, doubles, percentages)

_GREEK = ("alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta", "vartheta", "iota",
          "kappa", "lambda", "mu", "nu", "xi", "rho", "sigma", "tau", "upsilon", "phi", "varphi", "chi", "psi",
          "omega", "Gamma", "Delta", "Theta", "Lambda", "Xi", "Sigma", "Phi", "Psi", "Omega")
_REWRITES = (
    (re.compile(r"\\(?:text|textbf|textit|mbox|mathrm|operatorname)\s*\{[^{}]*\}"), " ; "),  # words: a barrier
    (re.compile(r"\\left|\\right|\\!|\\,|\\;|\\:|\\quad|\\qquad|\\displaystyle"), " "),
    (re.compile(r"\\(?:cdot|times|ast)|[×∙·]"), "*"),
    (re.compile(r"\\div|÷"), "/"),
    (re.compile(r"[−–]"), "-"),
    (re.compile(r"\\\$|\$|\\\(|\\\)|\\\[|\\\]"), " $ "),  # math delimiters end a side
    (re.compile(r"(?<=\d),(?=\d{3}(?!\d))"), ""),  # 1,000 -> 1000
    (re.compile(r"(?<=\d)\s*(?=\\[dt]?frac\s*\{\s*\d+\s*\}\s*\{\s*\d+\s*\})"), "+"),  # 1\frac{1}{3}: mixed
)
_FRACTION = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_ROOT = re.compile(r"\\sqrt\s*\{([^{}]*)\}")
_EQUALS = re.compile(r"(?<![<>!=:\\])=(?!=)")
_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d+)?|\.\d+)|(?P<pi>\\pi(?![A-Za-z]))"
    r"|(?P<name>\\(?:" + "|".join(_GREEK) + r")(?![A-Za-z])|[A-Za-z](?:_(?:\([A-Za-z0-9]\)|[A-Za-z0-9]))?(?![A-Za-z]))"
    r"|(?P<word>[A-Za-z]{2,})|(?P<op>[-+*/^])|(?P<open>\()|(?P<close>\))"
    r"|(?P<stop>[,;:?!]|\.(?!\d)|\$|$)|(?P<other>\\[A-Za-z]+|\S))")
_NUMBER = re.compile(r"(?<![\d.])\d+(?:\.\d+)?")
# words that make a text's equalities conditions or equations to solve ("solve x^2 = 4", "x = 0 or x = 4", "when
# x + 8 = 0"), not claims about the values bound before: their names are unknowns again
_UNKNOWNS = re.compile(r"\b(?:solve[sd]?|solving|solutions?|roots?|zeros?|or|either|if|when|whenever|where|unless|"
                       r"suppose|assume|cases?|equations?|defined|undefined|satisf(?:y|ies))\b|\\pm", re.IGNORECASE)
# a side that runs into one of these words is a quantity with a unit, not the value an equality compares
_UNITS = frozenset({"cm", "mm", "km", "kg", "mg", "ft", "in", "inch", "inches", "feet", "foot", "yards", "miles",
                    "meters", "metres", "hours", "minutes", "seconds", "days", "weeks", "years", "degrees",
                    "dollars", "cents", "units", "percent", "mph", "lb", "lbs", "pounds", "ounces", "oz"})


class OutOfBudget(Exception):
    """The step's or the solution's budget ran out: what is left is unchecked."""


class Unparsed(Exception):
    """Not an expression this module reads (or a name not bound, a division by zero, a value out of bounds)."""


@dataclass(frozen=True)
class Token:
    kind: str
    text: str


class Budget:
    """Units of work left; ``spend`` raises ``OutOfBudget`` once they run out."""

    def __init__(self, units: int) -> None:
        self.left, self.spent = units, 0

    def spend(self, units: int = 1) -> None:
        self.left -= units
        self.spent += units
        if self.left < 0:
            raise OutOfBudget


def normalised(text: str) -> str:
    """LaTeX arithmetic as plain arithmetic: products and quotients as ``*`` and ``/``, fractions and roots as
    bracketed quotients and powers (innermost first), braces as brackets; text words and math delimiters kept
    as barriers a side cannot cross."""
    for pattern, replacement in _REWRITES:
        text = pattern.sub(replacement, text)
    for _ in range(4):
        text, fractions = _FRACTION.subn(r"((\1)/(\2))", text)
        text, roots = _ROOT.subn(r"((\1)^(0.5))", text)
        if not fractions and not roots:
            break
    return text.replace("{", "(").replace("}", ")")


def tokens(text: str) -> list[Token]:
    found: list[Token] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            break
        kind = match.lastgroup or "other"
        if kind == "stop" and not match.group(kind):  # the end of the text
            break
        written = match.group(kind)
        # x_{1} (braces read as brackets) and x_1 name one variable
        found.append(Token(kind, written.replace("(", "").replace(")", "") if kind == "name" else written))
        position = match.end()
    return found


_SIDE = frozenset({"num", "pi", "name", "op", "open", "close"})


def left_side(before: list[Token]) -> list[Token] | None:
    """The expression that ends the tokens before an "=", if it stands on its own: it begins after a word, a stop
    or an unmatched bracket; it may not begin with an operator after a word, nor follow anything else."""
    depth = 0
    start = len(before)
    while start > 0:
        token = before[start - 1]
        if token.kind not in _SIDE:
            break
        depth += token.kind == "close"
        depth -= token.kind == "open"
        if depth < 0:
            break
        start -= 1
    side = before[start:]
    boundary = before[start - 1] if start else None
    if not side or (boundary is not None and boundary.kind == "other"):
        return None
    if side[0].kind == "op" and not (side[0].text == "-" and (boundary is None or boundary.kind != "word")):
        return None
    return side


def right_side(after: list[Token]) -> list[Token] | None:
    """The expression that starts the tokens after an "=", if it stands on its own: it ends at a word (not a
    unit), a stop or an unmatched bracket, and not on an operator."""
    depth = 0
    end = 0
    while end < len(after):
        token = after[end]
        if token.kind not in _SIDE:
            break
        depth += token.kind == "open"
        depth -= token.kind == "close"
        if depth < 0:
            break
        end += 1
    side = after[:end]
    boundary = after[end] if end < len(after) else None
    if not side or side[-1].kind == "op" or boundary is not None and (
            boundary.kind == "other" or boundary.kind == "word" and boundary.text.lower() in _UNITS):
        return None
    return side


class Evaluator:
    """A recursive-descent reading of a side's tokens with the bound names substituted: sums, products (implicit
    ones too), right-associative bounded powers, signs and brackets. Raises ``Unparsed`` on anything else."""

    def __init__(self, side: Sequence[Token], bindings: dict[str, float], budget: Budget) -> None:
        self.side, self.bindings, self.budget = side, bindings, budget
        self.at = 0

    def value(self) -> float:
        if len(self.side) > MAX_SIDE_TOKENS:
            raise Unparsed
        result = self._sum()
        if self.at != len(self.side) or not math.isfinite(result):
            raise Unparsed
        return result

    def _peek(self) -> Token | None:
        return self.side[self.at] if self.at < len(self.side) else None

    def _sum(self) -> float:
        total = self._product()
        while (token := self._peek()) is not None and token.kind == "op" and token.text in "+-":
            self.at += 1
            term = self._product()
            total = total + term if token.text == "+" else total - term
        return total

    def _product(self) -> float:
        result = self._signed()
        while (token := self._peek()) is not None:
            if token.kind == "op" and token.text in "*/":
                self.at += 1
                factor = self._signed()
                if token.text == "/":
                    if factor == 0:
                        raise Unparsed
                    result /= factor
                else:
                    result *= factor
            elif token.kind in ("num", "pi", "name", "open"):  # 2x, 3(x+1), (a)(b)
                result *= self._power()
            else:
                break
        return result

    def _signed(self) -> float:
        token = self._peek()
        if token is not None and token.kind == "op" and token.text in "+-":
            self.at += 1
            inner = self._signed()
            return -inner if token.text == "-" else inner
        return self._power()

    def _power(self) -> float:
        base = self._atom()
        token = self._peek()
        if token is None or token.text != "^":
            return base
        self.at += 1
        exponent = self._signed_power()
        if abs(exponent) > MAX_POWER or abs(base) > MAX_BASE or (base < 0 and exponent != int(exponent)) or (
                base == 0 and exponent < 0):
            raise Unparsed
        return float(base ** exponent)

    def _signed_power(self) -> float:
        token = self._peek()
        if token is not None and token.kind == "op" and token.text == "-":
            self.at += 1
            return -self._power()
        return self._power()

    def _atom(self) -> float:
        self.budget.spend()
        token = self._peek()
        if token is None:
            raise Unparsed
        self.at += 1
        if token.kind == "num":
            return float(token.text)
        if token.kind == "pi":
            return math.pi
        if token.kind == "name":
            if token.text not in self.bindings:
                raise Unparsed
            return self.bindings[token.text]
        if token.kind == "open":
            inner = self._sum()
            closing = self._peek()
            if closing is None or closing.kind != "close":
                raise Unparsed
            self.at += 1
            return inner
        raise Unparsed


def _decimals(side: Sequence[Token]) -> int:
    return max((len(t.text.split(".")[1]) for t in side if t.kind == "num" and "." in t.text), default=0)


def agree(a: float, b: float, decimals: int) -> bool:
    """Equal, or within half a unit of the last digit a side shows (a rounded side)."""
    tolerance = 0.5 * 10.0 ** -decimals if decimals else 0.0
    return abs(a - b) <= tolerance + 1e-9 * max(1.0, abs(a), abs(b))


@dataclass
class Reading:
    """What one text (the problem or a step) gave: its bound-equality counts and the values its evaluated sides
    took."""

    checked: int = 0
    wrong: int = 0
    side_values: list[float] = field(default_factory=list)


def read_equalities(text: str, bindings: dict[str, float], rounded: set[str], budget: Budget) -> Reading:
    """Walks the text's equalities in order: a binding updates ``bindings`` (and ``rounded``, the names bound to
    a decimal that may be rounded) in place; an equality whose sides hold a bound name is checked. Past the
    budget the rest is left unchecked."""
    reading = Reading()
    parts = _EQUALS.split(normalised(text[:MAX_TEXT]))
    if len(parts) < 2:
        return reading
    bound_here: dict[str, float] = {}
    ambiguous: set[str] = set()
    conditional = _UNKNOWNS.search(text) is not None
    try:
        pieces = [tokens(part) for part in parts]
        for before, after in zip(pieces, pieces[1:], strict=False):
            budget.spend()
            left, right = left_side(before), right_side(after)
            if left is None:
                continue
            right_value = None if right is None else _value_of(right, bindings, budget)
            if len(left) == 1 and left[0].kind == "name":
                name = left[0].text
                if right is None or right_value is None or any(t.text == name for t in right):  # "x = 2x - 3"
                    bindings.pop(name, None)  # bound to what this module cannot read: its old value is stale
                    rounded.discard(name)
                    continue
                if _decimals(right) or any(t.text in rounded for t in right):
                    rounded.add(name)
                else:
                    rounded.discard(name)
                reading.side_values.append(right_value)
                if name in bound_here and not agree(bound_here[name], right_value, 0):
                    ambiguous.add(name)
                bound_here[name] = bindings[name] = right_value
                continue
            on_left, on_right = {t.text for t in left}, {t.text for t in right or ()}
            names = (on_left | on_right) & bindings.keys()
            if conditional or names & on_left & on_right:
                ambiguous |= names  # "x - 3 = -2x - 4": an equation in x, whatever x was
                continue
            left_value = _value_of(left, bindings, budget)
            if right is None or left_value is None or right_value is None:
                continue
            reading.side_values += [left_value, right_value]
            if any(t.kind == "name" for t in (*left, *right)):
                reading.checked += 1
                shown = max(_decimals(left), _decimals(right))
                if any(t.text in rounded for t in (*left, *right)):
                    reading.wrong += abs(left_value - right_value) > ROUNDED_TOLERANCE * max(
                        abs(left_value), abs(right_value)) and not agree(left_value, right_value, shown)
                else:
                    reading.wrong += not agree(left_value, right_value, shown)
    except OutOfBudget:
        pass
    for name in ambiguous:
        bindings.pop(name, None)
    return reading


def _value_of(side: Sequence[Token], bindings: dict[str, float], budget: Budget) -> float | None:
    try:
        return Evaluator(side, bindings, budget).value()
    except (Unparsed, OverflowError, RecursionError, ZeroDivisionError):
        return None


def _numbers(text: str) -> list[tuple[float, int]]:
    """The text's numbers (thousands separators read) with the decimals each shows."""
    plain = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text[:MAX_TEXT])
    return [(float(m), len(m.split(".")[1]) if "." in m else 0) for m in _NUMBER.findall(plain)]


def one_operation(pool: np.ndarray) -> np.ndarray:
    """Every value one operation of two pool numbers (or the square or root of one) gives, sorted. 0 and 1 are
    left out: x + 0 or x × 1 would let any number derive itself, and x + 1 would excuse every off-by-one."""
    pool = pool[(pool != 0) & (pool != 1)]
    a, b = pool[:, None], pool[None, :]
    with np.errstate(all="ignore"):
        values = np.concatenate([(a + b).ravel(), (a - b).ravel(), (a * b).ravel(), (a / b).ravel(), pool ** 2,
                                 np.sqrt(np.abs(pool))])
    return np.sort(values[np.isfinite(values)])


def _derivable(number: float, decimals: int, derived: np.ndarray) -> bool:
    tolerance = (0.5 * 10.0 ** -decimals if decimals else 0.0) + 1e-9 * max(1.0, abs(number))
    first = int(np.searchsorted(derived, number - tolerance))
    return first < derived.size and derived[first] <= number + tolerance


def _known(number: float, decimals: int, known: set[float]) -> bool:
    if number in known or number in GIVEN:
        return True
    return decimals > 0 and any(agree(value, number, decimals) for value in known if abs(value - number) < 1)


@dataclass(frozen=True)
class State:
    """What a solution's prefix leaves for its next step: the bound names, the numbers written or derived so far
    (most recent last), and the units its reading spent (out of the solution's budget)."""

    bindings: tuple[tuple[str, float], ...]
    rounded: frozenset[str]
    recent: tuple[float, ...]
    known: frozenset[float]
    spent: int


def _start(problem: str) -> State:
    bindings: dict[str, float] = {}
    rounded: set[str] = set()
    budget = Budget(STEP_BUDGET)
    reading = read_equalities(problem, bindings, rounded, budget)
    numbers = [value for value, _ in _numbers(problem)] + list(bindings.values()) + reading.side_values
    return State(tuple(bindings.items()), frozenset(rounded), tuple(dict.fromkeys(numbers))[-POOL:],
                 frozenset(numbers), budget.spent)


def _step(state: State, step: str) -> tuple[tuple[float, ...], State]:
    """One step's row of ``NAMES`` and the state after it."""
    if state.spent >= SOLUTION_BUDGET:  # the rest of the solution is unchecked, and its state stops growing
        return (0.0,) * len(NAMES), state
    budget = Budget(min(STEP_BUDGET, SOLUTION_BUDGET - state.spent))
    bindings, rounded = dict(state.bindings), set(state.rounded)
    reading = read_equalities(step, bindings, rounded, budget)
    numbers = _numbers(step)
    known = set(state.known) | set(bindings.values()) | set(reading.side_values)
    pool = np.array(list(dict.fromkeys([*state.recent, *(value for value, _ in numbers), 2.0])), dtype=np.float64)
    unfounded = 0
    derived: np.ndarray | None = None  # built once, for the first number not known
    try:
        for value, decimals in numbers:
            budget.spend()
            if _known(value, decimals, known):
                continue
            if derived is None:
                budget.spend(DERIVATION_COST)
                derived = one_operation(pool)
            unfounded += not _derivable(value, decimals, derived)
    except OutOfBudget:
        pass
    written = [value for value, _ in numbers] + list(bindings.values()) + reading.side_values
    after = State(tuple(bindings.items()), frozenset(rounded), tuple(dict.fromkeys([*state.recent, *written]))[-POOL:],
                  state.known | frozenset(written), state.spent + budget.spent)
    row = (math.log1p(reading.checked), math.log1p(reading.wrong), math.log1p(unfounded),
           unfounded / len(numbers) if numbers else 0.0)
    return row, after


# A prefix's state is read once: an ``alternatives`` export repeats each chosen prefix in every rated alternative's
# row after it, and each row's last step is new (the rows of one problem come together: a small cache suffices).
@functools.lru_cache(maxsize=1 << 12)
def _after(problem: str, steps: tuple[str, ...]) -> tuple[tuple[float, ...], State]:
    if not steps:
        return (), _start(problem)
    return _step(_after(problem, steps[:-1])[1], steps[-1])


def symbolic_features(problem: str, steps: Sequence[str]) -> np.ndarray:
    """One row of ``NAMES`` per step (counts on a log scale), each read after the problem and the steps before it."""
    rows = []
    for index in range(len(steps)):
        row, _ = _after(problem, tuple(steps[:index + 1]))
        rows.append(row)
    return np.array(rows, dtype=np.float32).reshape(len(steps), len(NAMES))
