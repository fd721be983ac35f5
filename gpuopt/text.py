"""Text that must stay one line: what could break it or rewrite it, shown escaped.

A diagnostic on stderr and a comment after a `vllm serve` command both carry what a user wrote (a model name,
a workload name, a flag). A newline in a shell comment ends it, and the rest runs as the next command when the
line is pasted; an ANSI escape rewrites the terminal. So C0 and C1 controls and DEL (newlines, ANSI escapes,
\\x1c-\\x1e and \\x85 split lines too), U+2028/U+2029 (line breaks for str.splitlines() and many viewers) and the
bidi overrides U+202A-U+202E and U+2066-U+2069 (they reorder text) are written as backslash escapes.
"""

from __future__ import annotations

_UNSAFE = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))} | {
    c: f"\\u{c:04x}" for c in (0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A),
                                0x200E, 0x200F, 0x061C)}  # the last three: bidi marks, which reorder too

# characters nothing shows: a name holding one looks like another name (ad<U+200B>min), so inputs refuse them
# (they change nothing on a terminal, so results keep them; reports use U+2060 themselves: formatting.md)
INVISIBLE = frozenset(chr(c) for c in (*range(0x200B, 0x200E), 0x180E, 0xFEFF, *range(0x2060, 0x2065)))


def printable(text: str) -> str:
    """`text` as one line, with what could break or rewrite the line shown escaped."""
    return text.translate(_UNSAFE)


# the same characters, for a whole result on stdout: line breaks and tabs are the result's own layout and stay;
# the rest are written as \uXXXX, an escape JSON (whose strings may carry C1 controls and U+2028 raw), YAML's
# double-quoted strings and a reader alike take for what it is
_UNSAFE_IN_RESULTS = {c: f"\\u{c:04x}" for c in _UNSAFE if c not in (0x09, 0x0A)}


def result_text(text: str) -> str:
    """`text` (a whole result, many lines) with nothing a terminal would run: no ANSI escape sequence that
    retitles the window, sets a hyperlink or resets the screen, no C1 control, no bidi override."""
    return text.translate(_UNSAFE_IN_RESULTS)


def one_line_problem(text: str) -> str | None:
    """Why `text` cannot be a name or a cell (one line of visible text), else None."""
    if printable(text) != text:
        return f"'{printable(text)}' holds a control character or a line break"
    hidden = sorted({f"U+{ord(c):04X}" for c in text if c in INVISIBLE})
    if hidden:
        shown = text.translate({ord(c): f"\\u{ord(c):04x}" for c in INVISIBLE})
        return f"'{shown}' holds an invisible character ({', '.join(hidden)}), so it would look like another name"
    return None
