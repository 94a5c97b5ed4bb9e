"""The math-delimiter scan is one pass: the same spans as the lazy regular expression it replaced, on nested and
unbalanced delimiters, and a 1,000,000-character step without closers is answered (page and re-split) at once."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse
from hypothesis import given, settings
from hypothesis import strategies as st

from annotate.models import Role
from annotate.rendering import math_source, math_spans, render_markdown, step_source
from tests.factories import MembershipFactory, SolutionFactory

# the expression the scan replaced: right on short texts, quadratic on long ones without closers
REFERENCE = re.compile(r"\$\$.+?\$\$|\\\[.+?\\\]|\\\(.+?\\\)|(?<!\\)\$[^$\n]+?(?<!\\)\$", re.S)
HUGE = "\\(x" * 333_334  # 1,000,002 characters: openers and never a closer


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=["$", "\\", "(", ")", "[", "]", "x", "\n"], max_size=24))
def test_scan_finds_what_the_reference_expression_finds(text: str) -> None:
    assert math_spans(text) == [match.span() for match in REFERENCE.finditer(text)]


@pytest.mark.parametrize(("text", "spans"), [
    ("\\(a \\(b\\) c\\)", [(0, 9)]),  # nested: the first closer ends it
    ("\\(x \\(y \\(z", []),  # unbalanced: no math
    ("$$a$$ and $b$ and \\[c\\]", [(0, 5), (10, 13), (18, 23)]),
    ("\\$5 and $6$", [(8, 11)]),  # an escaped dollar opens nothing
    ("$a\nb$", []),  # inline math stays on one line
    ("\\(a\nb\\)", [(0, 7)]),  # the others may span lines
])
def test_nested_and_unbalanced_delimiters(text: str, spans: list[tuple[int, int]]) -> None:
    assert math_spans(text) == spans


def test_a_huge_step_without_closers_renders_as_it_is(no_hang) -> None:
    with no_hang():
        assert math_source(HUGE) == HUGE
        assert step_source(HUGE + "\n\n# Answer\n\n$x$") == HUGE + "\n\n# Answer\n\n$x$"
        assert "\\(a\\)" in render_markdown("\\(a\\) " + HUGE[:3000])  # math kept from Markdown
        assert step_source("\n" * 500_000 + "```\ncode\n```").count("<pre") == 1  # fenced: Markdown


@pytest.mark.django_db
def test_resplit_page_of_a_million_character_step_answers(client, campaign_factory, make_user, no_hang) -> None:
    campaign = campaign_factory("huge")
    boss = make_user("boss")
    MembershipFactory(campaign=campaign, user=boss, role=Role.ADMIN)
    solution = SolutionFactory(campaign=campaign, steps=[HUGE, "Then $y$."])
    client.force_login(boss)
    with no_hang():
        page = client.get(reverse("manage:resplit", args=[campaign.slug, solution.pk]))
    assert page.status_code == 200
    assert page.content.decode().count("\\(x\\(x\\(x") > 0
