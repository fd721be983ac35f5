"""Keep stdout for results: whatever a library writes while a command computes goes to stderr.

HiGHS (highspy) prints its banner from C++ straight to file descriptor 1, whatever PuLP's `msg=False` says;
with `--format json|csv|focus` that line makes stdout unparseable. Redirecting the descriptor itself (not
only `sys.stdout`) catches C, C++ and subprocess output alike.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


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
