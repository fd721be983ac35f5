"""Number formatting and escaping shared by the renderers.

Every string a user controls (workload names and tags, model ids, overlay SKUs and services, price sources)
goes through `md` before it reaches Markdown (and so the HTML rendered from it), through `html_text` before
it reaches HTML directly, and through `csv_cell` before it reaches a CSV cell.
"""

from __future__ import annotations

import html
import os
import re
import sys
from typing import IO, TYPE_CHECKING

from gpuopt.pricing.identifiers import FORMULA_PREFIXES  # one list: overlays refuse them, exports neutralise them
from gpuopt.text import printable, result_text

if TYPE_CHECKING:
    from rich.console import Console

# Markdown punctuation that could start emphasis, code, a link or an image, or end a table cell, anywhere in a
# line (line breaks are removed, so user text starts at most one line).
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|])")
# what starts a block when it begins a line -- a heading, quote, list item, setext underline or fence: user text
# that begins a line (a model named "# APPROVED BY FINANCE" opened a workload's paragraph, and became its <h1>; a
# workload named "1." a numbered list) has its first mark escaped, which Markdown shows as the mark itself
_BLOCK_START = re.compile(r"^(?:([#+=~-])|(\d{1,9})([.)])(?=\s|$))")
# an @name GitHub would turn into a mention (a diff posted as a PR comment would ping the team a plan file names):
# an invisible word joiner after the @ keeps the text and drops the mention; `file.csv@045df3b` is no mention
_MENTION = re.compile(r"(?<!\w)@(?=\w)")


def money(value: float | None, currency: str, digits: int = 2) -> str:
    """`1,234.50 USD`; `-` when there is no value."""
    return "-" if value is None else f"{value:,.{digits}f} {currency}"


def signed_money(value: float, currency: str) -> str:
    """`+1,234.50 USD` / `-12.00 USD`: how far a figure is above (+) or below (-) another."""
    return f"{value:+,.2f} {currency}"


def md(text: object) -> str:
    """Text for a Markdown inline context (a table cell, a list item, a heading): HTML special characters
    become entities (raw HTML in Markdown passes straight into the HTML), Markdown punctuation is
    backslash-escaped (no link, image, emphasis or cell break can be injected), line breaks become spaces, and
    control characters become escapes (text.printable), and an @mention is no mention (_MENTION)."""
    value = printable(html.escape(str(text), quote=False).replace("\r", " ").replace("\n", " "))
    # leading blanks go first: up to 3 spaces still start a block in CommonMark, 4 start a code block (review)
    # `~` as its entity: GitHub strikes `~~text~~` through, and Python-Markdown (the HTML report) shows a
    # backslash-escaped `\~` with its backslash (QA); an entity starts no `~~~` fence either
    value = _MD_SPECIAL.sub(r"\\\1", value.lstrip(" \t")).replace("~", "&#126;")
    value = _BLOCK_START.sub(lambda m: f"\\{m[1]}" if m[1] else f"{m[2]}\\{m[3]}", value, count=1)
    return _MENTION.sub("@\u2060", value)


def md_code(text: object) -> str:
    """An identifier as inline code when that is safe (no backtick, no line break), else as escaped text.
    Code spans show their content literally, in Markdown viewers and in the HTML alike."""
    value = str(text)
    if "`" in value or value != printable(value) or not value:  # a line break or a control character
        return md(value)
    return f"`{value}`"


def md_code_fence(code: str, lang: str = "") -> list[str]:
    """A fenced code block whose fence is longer than any backtick run inside (so the code cannot close it)."""
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + lang, result_text(code.replace("\r", " ")), fence]


def html_text(text: object) -> str:
    """Text for an HTML element or attribute; a control character (which a page shows as nothing, and a
    terminal showing the file would run) written as an escape."""
    return html.escape(result_text(str(text)), quote=True)


def csv_cell(value: object) -> object:
    """A string a spreadsheet would evaluate (OWASP CSV injection: it begins with =, +, -, @, tab or CR) gets a
    leading apostrophe, which spreadsheets show as text; numbers pass unchanged (a negative number in a
    numeric column is a number, not a formula)."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def markdown_to_html(text: str) -> str:
    """Python-Markdown with raw HTML switched off: should any unescaped tag slip into the Markdown, it is
    shown as text, never parsed as HTML."""
    import markdown

    converter = markdown.Markdown(extensions=["tables", "fenced_code"])
    converter.preprocessors.deregister("html_block")
    converter.inlinePatterns.deregister("html")
    return str(converter.convert(text))


WIDE = 160  # the width of tables written to a file or a pipe (no terminal to fit)
NARROW = 100  # below this, renderers switch to their compact layout


def terminal_width(width: int | None = None) -> int:
    """The width tables are laid out for: an explicit width, else COLUMNS, else the terminal's when stdout is
    one, else WIDE (a file or a pipe has no width to fit)."""
    if width:
        return width
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        if sys.stdout.isatty():
            return os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError, AttributeError):
        pass
    return WIDE


def console(file: IO[str], width: int | None = None) -> Console:
    """A plain-text rich Console (no colour, no markup) laid out for `terminal_width(width)`."""
    from rich.console import Console

    return Console(file=file, width=terminal_width(width), color_system=None, force_terminal=False, markup=False,
                   highlight=False)
