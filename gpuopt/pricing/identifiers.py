"""Identifier cells that a spreadsheet would run as a formula.

An overlay's identifiers (SKU, service, ...) travel verbatim into CSV and FOCUS exports that finance opens
in a spreadsheet. OWASP's CSV-injection guidance names the cells a spreadsheet may evaluate: those that
begin with `=`, `+`, `-`, `@`, a tab or a carriage return. The exports neutralise such cells, but an
identifier that starts with one is no real provider's name for anything, so the overlay is refused instead
of being silently rewritten.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gpuopt.text import one_line_problem

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
IDENTIFIER_COLUMNS = ("provider", "service", "sku", "region", "gpu", "price_kind", "currency", "interconnect",
                      "billing")


def looks_like_formula(text: str) -> bool:
    """True when a spreadsheet could evaluate the cell (OWASP CSV injection)."""
    return text.startswith(FORMULA_PREFIXES)


def formula_problems(path: str, rows: Iterable[tuple[int, Mapping[str, str]]]) -> list[str]:
    """One problem per identifier cell that begins like a formula, and per cell of any column that holds a
    control character or a line break (an identifier or a citation is one line of text: a line break in a
    SKU split the rows of every table it reached, an ESC sequence ran in the terminal); `rows` are (line,
    values) pairs. Values are checked before stripping: a leading tab or carriage return counts."""
    problems = []
    for line, values in rows:
        for column in IDENTIFIER_COLUMNS:
            value = values.get(column) or ""
            if looks_like_formula(value):
                problems.append(f"{path}: row {line}: column '{column}': {value.strip()!r} begins with "
                                f"{value[0]!r}, which a spreadsheet evaluates as a formula")
        for column, value in values.items():
            if not value or (column in IDENTIFIER_COLUMNS and looks_like_formula(value)):
                continue
            if (problem := one_line_problem(value)) is not None:
                problems.append(f"{path}: row {line}: column '{column}': {problem}")
    return problems
