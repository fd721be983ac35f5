"""Region ids -> country, jurisdiction, geo; and the residency selectors users write (`--region cn`).

Selectors: `cn` (mainland China only: Hong Kong is its own jurisdiction), `global` (anywhere, including
serverless "global" placement and rows whose region the source did not state), `us`, `eu` (EU member
states; the UK is not), `apac`, an exact region id (`us-east-1`, `cn-hangzhou`, `ap-guangzhou`), or a
comma-separated list of any of these.

Rows sold as "global" (RunPod) or whose region the source left out (DigitalOcean sizes) may carry the
data-centre countries their sources list (`countries`, e.g. "US;CA;NL"). `us`, `eu` and `apac` admit such a
row when one of its countries matches, on the condition that the user pins the deployment to a data centre
there (RunPod `dataCenterIds`, a DigitalOcean region); an exact region id never matches them, and `cn` only
through a CN country (none is listed: no such provider has a mainland data centre).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, cached_property

from gpuopt.datafiles import data_csv
from gpuopt.errors import InputError, UnknownNameError

GEO_SELECTORS = ("cn", "global", "us", "eu", "apac")


@dataclass(frozen=True)
class Region:
    region: str
    country: str
    jurisdiction: str
    geo: str
    providers: tuple[str, ...] = ()  # whose region id this is (regions.csv); empty: any provider's
    # who runs the region and invoices it when not the provider itself (AWS China: Sinnet, NWCD); FOCUS
    # InvoiceIssuerName
    operator: str = ""


@cache
def regions() -> dict[str, Region]:
    out = {}
    for row in data_csv("regions.csv", package="gpuopt.pricing"):
        out[row["region"]] = Region(row["region"], row["country"], row["jurisdiction"], row["geo"],
                                    split_countries(row.get("providers", "")), row.get("operator", ""))
    return out


def region_info(region_id: str, provider: str = "") -> Region:
    """Where `provider`'s region `region_id` is. Providers reuse ids for different places (AWS's ap-southeast-3
    is Jakarta; Alibaba's, Kuala Lumpur; AWS's eu-west-1 is Ireland, Alibaba's London), so a region's country
    holds only for the providers whose rows in ../shared/data established it (regions.csv `providers`); another
    provider's region of that id is of unknown country -- admitted under `global` or its exact id, never by a
    country selector it may not satisfy."""
    known = regions().get(region_id)
    if known is None or (provider and known.providers and provider not in known.providers):
        return Region(region_id, "", "", "unknown")
    return known


@cache
def countries() -> dict[str, Region]:
    """Country code -> (country, jurisdiction, geo), for rows that carry data-centre countries."""
    return {r["country"]: Region("", r["country"], r["jurisdiction"], r["geo"])
            for r in data_csv("countries.csv", package="gpuopt.pricing")}


def split_countries(value: str) -> tuple[str, ...]:
    return tuple(c.strip() for c in value.split(";") if c.strip())


_GEO_SELECTORS_BY_COUNTRY = ("us", "eu", "apac", "cn")


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
    raise _unknown(selector)


def _unknown(selector: str) -> UnknownNameError:
    """An unknown selector, saying what a selector is (a close region id alone, "did you mean ams3?" for
    "mars", would read as the only choice), then the close region ids."""
    error = UnknownNameError("region selector", selector, sorted(regions()))
    hint = f"; did you mean {', '.join(error.suggestions)}?" if error.suggestions else ""
    InputError.__init__(error, f"unknown region selector '{selector}' (use {', '.join(GEO_SELECTORS)}, or a region "
                               f"id such as us-east-1 or cn-hangzhou){hint}")
    return error


@dataclass(frozen=True)
class Residency:
    """A parsed selector: which regions data may live in."""

    selector: str

    def __post_init__(self) -> None:
        _ = self.predicates  # fail early on unknown selectors

    @cached_property
    def predicates(self) -> list[Callable[[Region], bool]]:
        parts = self.selector.split(",")
        if not any(p.strip() for p in parts):
            raise _unknown(self.selector)
        if len(parts) > 1 and not all(p.strip() for p in parts):
            # QA: 'us,,eu' was read as 'us,eu' -- an element left out, or a typo, is not "anywhere"
            raise InputError(f"region selector '{self.selector}': an empty element; separate selectors by single "
                             "commas, e.g. 'us,eu'")
        return [_one(p) for p in parts]

    def allows(self, region_id: str, data_centre_countries: str = "", provider: str = "") -> bool:
        """Whether `provider`'s row in region_id may be used; data_centre_countries ("US;CA") widens a global or
        unstated region to the geo selectors (us, eu, apac, cn) that one of those countries satisfies."""
        info = region_info(region_id, provider)
        if any(pred(info) for pred in self.predicates):
            return True
        if not data_centre_countries or info.geo not in ("global", "unknown"):
            return False
        geo_parts = [p for p in self.selector.split(",") if p.strip().lower() in _GEO_SELECTORS_BY_COUNTRY]
        if not geo_parts:
            return False
        known = countries()
        preds = [_one(p) for p in geo_parts]
        return any(pred(known[c]) for c in split_countries(data_centre_countries) if c in known for pred in preds)

    def pinned_countries(self, region_id: str, data_centre_countries: str = "", provider: str = "") -> list[str]:
        """The data-centre countries a row is admitted through, when its own region is not (a `global` row of
        RunPod under `us`): the deployment keeps the residency only if it is pinned to one of them. Empty when
        the region itself satisfies the selector or the row is not admitted at all."""
        info = region_info(region_id, provider)
        if any(pred(info) for pred in self.predicates) or not self.allows(region_id, data_centre_countries, provider):
            return []
        known = countries()
        preds = [_one(p) for p in self.selector.split(",") if p.strip().lower() in _GEO_SELECTORS_BY_COUNTRY]
        return [c for c in split_countries(data_centre_countries) if c in known and any(p(known[c]) for p in preds)]

    @property
    def is_restrictive(self) -> bool:
        return self.selector.strip().lower() != "global"
