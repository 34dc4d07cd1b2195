"""Ids wrap only at their separators; Markdown escapes only what is markup."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

from evalops.report.ids import ident, prose
from evalops.report.text import md


def test_an_id_may_wrap_after_each_separator_and_nowhere_else() -> None:
    shown = str(ident("support-refund_in.order/a:b"))
    assert shown == ('<span class="id">support-<wbr>refund_<wbr>in.<wbr>order/<wbr>a:<wbr>b</span>')
    # A run of separators is one place to wrap; a trailing one adds nothing.
    assert str(ident("a--b-")) == '<span class="id">a--<wbr>b-</span>'


def test_a_digest_may_wrap_every_16_hex_digits() -> None:
    digest = "sha256:" + "0123456789abcdef" * 4
    pieces = re.sub(r"</?span[^>]*>", "", str(ident(digest))).split("<wbr>")
    assert pieces == ["sha256:", *["0123456789abcdef"] * 4]


def test_a_short_value_never_wraps_and_everything_is_escaped() -> None:
    assert str(ident("sha256:abc-def", "id nowrap")) == (
        '<span class="id nowrap">sha256:abc-def</span>'
    )
    assert "<script>" not in str(ident("<script>-x"))
    assert str(prose("config sha256:" + "a" * 64 + " <b>")).count("<wbr>") == 4
    assert "&lt;b&gt;" in str(prose("config sha256:" + "a" * 64 + " <b>"))


def test_an_id_already_markup_and_the_same_text_plain_are_each_shown_as_before() -> None:
    """Ids are remembered across pages; a `Markup` equals and hashes as the plain text it
    spells, so neither may be answered with the other's HTML, in either order."""
    from markupsafe import Markup

    text = "a<b&c/d"
    plain = '<span class="id nowrap">a&lt;b&amp;c/d</span>'
    marked = '<span class="id nowrap">a<b&c/d</span>'
    for first, second in ((text, Markup(text)), (Markup(text), text)):
        for value in (first, second, first):
            want = marked if isinstance(value, Markup) else plain
            assert str(ident(value, "id nowrap")) == want
    assert str(ident(text)) == '<span class="id">a&lt;b&amp;c/<wbr>d</span>'
    for kind in (Markup("id&x"), "id&x", Markup("id&x")):
        want = "id&x" if isinstance(kind, Markup) else "id&amp;x"
        assert str(ident("x", kind)) == f'<span class="{want}">x</span>'
    assert str(ident(text)) == str(ident(text))


def test_markdown_leaves_plain_punctuation_as_written() -> None:
    text = "with 4 paired tasks McNemar's smallest p-value is 0.125 > alpha 0.05 (a+b=c)."
    assert md(text) == text


def test_markdown_still_escapes_what_would_be_markup() -> None:
    render = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render
    for hostile in ("# h", "- item", "1. one", "> quote", "+ x", "=== ", "*em* _em_",
                    "[a](b)", "<b>x</b>", "a | b", "~~s~~", "`c`", "&amp;"):  # fmt: skip
        html = render(md(hostile))
        assert html.startswith("<p>") and html.count("<") == 2, (hostile, html)


def test_spaces_at_the_edges_of_free_text_change_no_markdown_structure() -> None:
    parser = MarkdownIt("commonmark")
    for text in (" x", "  x", "    x", "x  ", " - x ", "   # x"):
        nested = parser.render(f"- {md(text)} tail\n  - sub\n")
        assert nested.count("<ul>") == 2 and "<pre>" not in nested, (text, nested)
        line = parser.render(f"{md(text)}\nnext\n")
        assert "<br" not in line and "<pre>" not in line and "<h" not in line, (text, line)
    # still spaces when read: character references, not escapes shown as text
    assert parser.render(md(" x")).strip() == "<p> x</p>"
