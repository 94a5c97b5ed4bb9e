"""Math passes through to KaTeX untouched; bare \\boxed{} gets delimiters; instructions are sanitised Markdown."""
from __future__ import annotations

from annotate.rendering import answer_source, math_source, render_markdown


def test_bare_boxed_is_wrapped_but_math_is_left_alone() -> None:
    assert math_source("So \\boxed{\\frac{1}{2}} here") == "So \\(\\boxed{\\frac{1}{2}}\\) here"
    assert math_source("$\\boxed{3}$ and \\[\\boxed{4}\\]") == "$\\boxed{3}$ and \\[\\boxed{4}\\]"
    assert math_source("broken \\boxed{1") == "broken \\boxed{1"


def test_answer_becomes_math() -> None:
    assert answer_source("\\frac{1}{2}") == "\\(\\frac{1}{2}\\)"
    assert answer_source("$5$") == "$5$"
    assert answer_source(None) == ""


def test_markdown_keeps_math_and_drops_scripts() -> None:
    html = render_markdown("**Bold** $a_1 * b_1 \\{x\\}$ [x](javascript:alert(1)) <script>alert(1)</script>")
    assert "<strong>Bold</strong>" in html
    assert "$a_1 * b_1 \\{x\\}$" in html
    assert "<script>" not in html and "javascript:" not in html
