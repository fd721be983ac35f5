"""What every importer shares: where ../shared/data is, `--write`, and printing the merge report.

An importer is optional tooling: gpuopt builds, tests and runs from its package data alone. Run one from the
repository root, e.g. `python -m tools.import_gpus` (report what it would add, change and keep) and then
`python -m tools.import_gpus --write` (merge into the package file).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from tools.merge import Merge, write_csv

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SHARED = ROOT.parent / "shared" / "data"


def arguments(description: str | None, argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED,
                        help=f"the shared data folder to import from (default: {DEFAULT_SHARED})")
    parser.add_argument("--package", type=Path, default=ROOT / "gpuopt",
                        help="the gpuopt package folder to merge into (default: this repository's)")
    parser.add_argument("--write", action="store_true", help="merge into the package files (default: only report)")
    parser.add_argument("--summary", action="store_true", help="one line per file instead of one per row")
    args = parser.parse_args(argv)
    if not args.shared.is_dir():
        sys.exit(f"error: {args.shared}: no shared data folder (nothing requires it; pass --shared PATH to import)")
    return args


def finish(merges: Sequence[Merge], args: argparse.Namespace) -> None:
    """Print each file's report; with --write, write the files."""
    for merge in merges:
        print(merge.report(detail=not args.summary))
        if args.write:
            write_csv(args.package.parent / merge.name, merge.columns, merge.rows)
    if not args.write:
        print("(nothing written: pass --write to merge)")
