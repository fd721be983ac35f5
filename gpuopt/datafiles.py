"""The package's own data files (gpuopt/data/), read once by the module that owns each.

Ground floor, like `errors` and `hardware`: every layer may import it. Shipped YAML is trusted and large (the
serve-flag table is 2,700 lines), so it is parsed with libyaml's C loader when PyYAML was built with it (the
manylinux wheels are): 8-10x faster than the pure-Python SafeLoader, same safe subset of YAML. User files go
through gpuopt.inputs.loader instead (duplicate keys and deep nesting rejected, line numbers in errors).
"""

from __future__ import annotations

import csv
from importlib import resources
from typing import Any

import yaml

_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def data_text(name: str, package: str = "gpuopt") -> str:
    """The text of `package`/data/`name` (the pricing layer keeps its catalog, regions and FX in
    gpuopt.pricing/data, beside the code that owns them)."""
    return resources.files(package).joinpath("data", name).read_text(encoding="utf-8")


def data_csv(name: str, package: str = "gpuopt") -> list[dict[str, str]]:
    """`package`/data/`name` read as CSV rows, each a dict keyed by the header."""
    return csv_rows(data_text(name, package))


def csv_rows(text: str) -> list[dict[str, str]]:
    """CSV text as rows, each a dict keyed by the header (for data that may also come from a user's cache)."""
    return list(csv.DictReader(text.splitlines()))


def data_yaml(name: str) -> Any:
    """gpuopt/data/`name` parsed as YAML (safe subset)."""
    return yaml.load(data_text(name), Loader=_SafeLoader)  # noqa: S506 -- a safe loader, C or Python
