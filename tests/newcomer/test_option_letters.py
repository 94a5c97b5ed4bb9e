"""A multiple-choice answer is a letter, not math: a step's "# Answer" block holding "B" or "(B)" stays text (it used
to be set in KaTeX italics as a variable), while a math answer block still renders as math."""
from __future__ import annotations

from annotate.rendering import step_source


def test_an_option_letter_answer_block_stays_text() -> None:
    for letter in ("B", "(B)", "B."):
        shown = step_source(f"Option B is the only prime.\n\n# Answer\n\n{letter}")
        assert "\\(" not in shown and shown.endswith(letter)
    assert step_source("So it is 20/3.\n\n# Answer\n\n\\dfrac{20}{3}").endswith("\\(\\dfrac{20}{3}\\)")
    assert step_source("# Answer\n\nx").endswith("\\(x\\)")  # a variable stays math
