"""Region ids -> country, jurisdiction, geo; and the residency selectors users write (`--region cn`).

Selectors: `cn` (mainland China only: Hong Kong is its own jurisdiction), `global` (anywhere, including
serverless "global" placement and rows whose region the source did not state), `us`, `eu` (EU member
states; the UK is not), `apac`, an exact region id (`us-east-1`, `cn-hangzhou`, `ap-guangzhou`), or a
comma-separated list of any of these.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources

from gpuopt.errors import UnknownNameError

GEO_SELECTORS = ("cn", "global", "us", "eu", "apac")


@dataclass(frozen=True)
class Region:
    region: str
    country: str
    jurisdiction: str
    geo: str


@cache
def regions() -> dict[str, Region]:
    text = resources.files("gpuopt.pricing").joinpath("data/regions.csv").read_text(encoding="utf-8")
    out = {}
    for row in csv.DictReader(text.splitlines()):
        out[row["region"]] = Region(row["region"], row["country"], row["jurisdiction"], row["geo"])
    return out


def region_info(region_id: str) -> Region:
    return regions().get(region_id, Region(region_id, "", "", "unknown"))


def _one(selector: str) -> Callable[[Region], bool]:
    s = selector.strip().lower()
    if s == "global":
        return lambda r: True
    if s == "cn":
        return lambda r: r.jurisdiction == "CN"
    if s == "us":
        return lambda r: r.country == "US"
    if s == "eu":
        return lambda r: r.jurisdiction == "EU"
    if s == "apac":
        return lambda r: r.geo == "apac"
    known = {k.lower(): k for k in regions()}
    if s in known:
        exact = known[s]
        return lambda r: r.region == exact
    raise UnknownNameError("region selector", selector, [*GEO_SELECTORS, *sorted(regions())])


@dataclass(frozen=True)
class Residency:
    """A parsed selector: which regions data may live in."""

    selector: str

    def __post_init__(self) -> None:
        _ = self.predicates  # fail early on unknown selectors

    @cached_property
    def predicates(self) -> list[Callable[[Region], bool]]:
        parts = [p for p in self.selector.split(",") if p.strip()]
        if not parts:
            raise UnknownNameError("region selector", self.selector, GEO_SELECTORS)
        return [_one(p) for p in parts]

    def allows(self, region_id: str) -> bool:
        info = region_info(region_id)
        return any(pred(info) for pred in self.predicates)

    @property
    def is_restrictive(self) -> bool:
        return self.selector.strip().lower() != "global"
