"""Numbers as files and flags write them: ASCII decimals, finite.

Python's float() and int() read more than a CSV, a provider's answer or a flag means: digit groups (`1_000`),
Arabic-Indic and full-width digits, `nan` and `inf` (QA: `٠.١` planned at 0.1 USD/h, `--fx-rate USD:CNY=7_1` at
71). Every number gpuopt reads from a user's file or flag, or a provider's answer, goes through here: the files'
and answers' readers call parse_decimal / parse_whole, the flags' types (cli/options.py FINITE_FLOAT, ASCII_INT)
written_as_number / written_as_whole before click converts them.
"""

from __future__ import annotations

import math
import re

_DECIMAL = re.compile(r"\s*\+?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?\s*", re.ASCII)
_WHOLE = re.compile(r"\s*[0-9]+\s*", re.ASCII)
_SIGNED = re.compile(r"\s*[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?\s*|\s*[-+]?(nan|inf|infinity)\s*",
                     re.ASCII | re.IGNORECASE)
_SIGNED_WHOLE = re.compile(r"\s*[-+]?[0-9]+\s*", re.ASCII)


def parse_decimal(raw: str) -> float | None:
    """A finite number >= 0 written in ASCII decimals, or None (`nan`, `inf`, `1e400`, `1_000`, `٢`, a sign)."""
    if not isinstance(raw, str) or not _DECIMAL.fullmatch(raw):
        return None
    value = float(raw)
    return value if math.isfinite(value) else None


def parse_whole(raw: str) -> int | None:
    """A whole number >= 0 written in ASCII digits, or None."""
    return int(raw) if isinstance(raw, str) and _WHOLE.fullmatch(raw) else None


def written_as_number(raw: str) -> bool:
    """Whether a flag's text is a number as one is typed (ASCII digits, a sign, a dot, an exponent, or nan/inf,
    which the flag's own check then names): not `1_000` or `٢`, which float() and int() also read."""
    return bool(_SIGNED.fullmatch(raw))


def written_as_whole(raw: str) -> bool:
    """Whether a flag's text is a whole number in ASCII digits, with a sign."""
    return bool(_SIGNED_WHOLE.fullmatch(raw))
