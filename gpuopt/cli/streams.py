"""Keep stdout for results: whatever a library writes while a command computes goes to stderr, and no result
carries a character a terminal would run.

HiGHS (highspy) prints its banner from C++ straight to file descriptor 1, whatever PuLP's `msg=False` says;
with `--format json|csv|focus` that line makes stdout unparseable. Redirecting the descriptor itself (not
only `sys.stdout`) catches C, C++ and subprocess output alike.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, BinaryIO, TextIO

from gpuopt.text import result_text


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """While the block runs, file descriptor 1 (and `sys.stdout`) write to stderr."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no real descriptor 1 (an embedding host): nothing a library could write to
        yield
        return
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


class ResultStream:
    """sys.stdout while a command runs. A result can carry what a user wrote -- a model name in a table, an
    overlay's SKU, a field of a hand-edited plan -- and a terminal runs the control characters in it (an ESC
    sequence retitles the window, sets a hyperlink or resets the screen). gpuopt writes none of its own to
    stdout (its consoles have no colour), so every one that arrives is a user's, and is written escaped
    (text.result_text); line breaks and tabs are the layout and stay. Everything else is the stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(result_text(text))

    @property
    def buffer(self) -> _EscapingBuffer:
        """The binary side escapes too: click writes bytes there (`echo(b"...")`), and re-wraps it in a text
        writer of its own when the stream's encoding is ASCII (PYTHONIOENCODING=ascii, a C locale), which
        would otherwise reach the real stdout past `write`."""
        return _EscapingBuffer(self._stream.buffer)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _EscapingBuffer:
    """ResultStream's binary side: UTF-8 bytes in, result_text applied, the same bytes out otherwise (bytes that
    are not UTF-8 pass through as they came, by surrogateescape)."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw

    def write(self, data: bytes) -> int:
        text = bytes(data).decode("utf-8", "surrogateescape")
        self._raw.write(result_text(text).encode("utf-8", "surrogateescape"))
        return len(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


@contextlib.contextmanager
def escaped_results() -> Iterator[None]:
    """While the block runs, what is written to sys.stdout passes through ResultStream."""
    with contextlib.redirect_stdout(ResultStream(sys.stdout)):
        yield
