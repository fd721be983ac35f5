"""The JSON contract of a plan: Plan.model_dump_json, stable key order, plain floats, a trailing newline.

Reading one back (`report`, `diff`, `deploy`) is reading user input: plan files are edited by hand and passed
around, so a file is checked as strictly as a workload file. The models refuse NaN and Infinity
(allow_inf_nan=False), negative costs and prices, unknown currencies and dates that are not YYYY-MM-DD; the
loader validates in pydantic's strict JSON mode, so "12" is not the number 12 and 1 is not `true`; and JSON
nested deeper than pydantic's parser allows (201 levels; a plan needs 6) is refused as not JSON instead of
overflowing the stack. Every problem is one line naming the file and the field's path.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from pydantic_core import from_json

from gpuopt.errors import InputError
from gpuopt.planner.plan import PLAN_SCHEMA_VERSION, Plan

if TYPE_CHECKING:
    from gpuopt.planner.capacity import CapacityPlan

MAX_PROBLEMS = 20
"""Problems listed one per line before the rest are counted: a plan of another version holds 10^4-10^5
candidates, each of which may fail the same way."""


def render_json(plan: Plan) -> str:
    """pydantic's compiled serializer: seven times faster than json.dumps on a plan of 60,000 candidates
    (0.4 s against 2.8 s), same keys and order; small floats print positionally (0.00007569, not 7.569e-05)."""
    return plan.model_dump_json(indent=2) + "\n"


def load_plan(text: str, source: str) -> Plan:
    """Read a saved solve plan back (for `gpuopt report` and `gpuopt diff`)."""
    plan = load_any_plan(text, source)
    if not isinstance(plan, Plan):
        raise InputError(f"{source}: a capacity plan, where a solve plan (\"kind\": \"gpuopt-plan\") is needed")
    return plan


def load_any_plan(text: str, source: str) -> Plan | CapacityPlan:
    """Read a saved solve plan (`kind: gpuopt-plan`) or capacity plan (`kind: gpuopt-capacity-plan`), in any
    `--candidates` form. InputError (exit 2), one line per problem, for anything else."""
    from gpuopt.planner.capacity import CapacityPlan

    if text.startswith("\ufeff"):
        raise InputError(f"{source}: not JSON (it starts with a byte order mark, U+FEFF: save it as UTF-8 without one)")
    try:
        # pydantic's parser, not json.loads: it stops at 201 levels of nesting with a message where json.loads
        # raised RecursionError (100,000 nested `[` ended in exit 70)
        data = from_json(text)
    except ValueError as exc:
        raise InputError(f"{source}: not JSON ({exc})") from None
    if repeated := repeated_keys(text):
        raise InputError(*(f"{source}: key {key!r} appears twice in one object: which one a JSON reader keeps is "
                           "not defined (gpuopt read the last), so a file that shows one value and means another "
                           "is refused; keep one" for key in repeated))
    kinds: dict[str, type[Plan] | type[CapacityPlan]] = {"gpuopt-plan": Plan, "gpuopt-capacity-plan": CapacityPlan}
    if not isinstance(data, dict) or data.get("kind") not in kinds:
        raise InputError(f"{source}: not a gpuopt plan (no \"kind\": \"gpuopt-plan\" or "
                         "\"gpuopt-capacity-plan\")")
    version = data.get("schema_version")
    if type(version) is not int or version != PLAN_SCHEMA_VERSION:
        raise InputError(f"{source}: plan schema_version {version!r} is not supported "
                         f"(this gpuopt reads {PLAN_SCHEMA_VERSION})")
    try:
        # strict: the JSON types as written (a number is not a string of digits, a count not a float)
        return kinds[data["kind"]].model_validate_json(text, strict=True)
    except ValidationError as exc:
        raise InputError(*problems(exc, source)) from None


def repeated_keys(text: str) -> list[str]:
    """The keys given twice within one JSON object (`"currency": "USD", "currency": "CNY"`), in order. The text
    has passed pydantic's parser, so it nests at most 201 levels: json's recursive reader is safe on it."""
    repeated: dict[str, None] = {}

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for key, _ in items:
            if key in seen:
                repeated[key] = None
            seen.add(key)
        return dict(items)

    json.loads(text, object_pairs_hook=pairs)
    return list(repeated)


def problems(exc: ValidationError, source: str) -> list[str]:
    """One line per problem: the file, the field's path (`deployments.0.cost_per_month`) and pydantic's
    message; after MAX_PROBLEMS, how many more there are."""
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        lines.append(f"{source}: not a valid gpuopt plan: {where + ': ' if where else ''}{message}")
    lines = list(dict.fromkeys(lines))
    if len(lines) > MAX_PROBLEMS:
        lines = lines[:MAX_PROBLEMS] + [f"{source}: and {len(lines) - MAX_PROBLEMS} more problems"]
    return lines
