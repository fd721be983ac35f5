"""`--candidates summary`: the candidate list of a plan cut to what a reviewer reads.

A plan considers 10^4-10^5 candidates; their list is 99 % of the JSON (1.7-4.7 MB for one workload). The
summary keeps, per workload, the count of each rejection reason with its cheapest few candidates, and the
cheapest few feasible candidates of each GPU type: enough to answer "why not X?" and "what else was close?",
small enough to keep plans in git.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from gpuopt.planner.plan import Candidate, CandidateGroup, CandidatesForm, CandidateSummary, Plan

PER_GROUP = 3


def _price_order(c: Candidate) -> tuple[bool, float, str, str, str]:
    price = c["instance_price_per_hour"]
    per_replica = None if price is None else price / max(c["gpus_per_instance"] or 1, 1) * (c["gpus_per_replica"] or 1)
    return (per_replica is None, per_replica or 0.0, c["provider"], c["sku"], c["region"])


def summarise(candidates: Sequence[Candidate], per_group: int = PER_GROUP) -> CandidateSummary:
    """Counts per (workload, reason kind) and per (workload, GPU) for feasible ones, each with its cheapest
    `per_group` candidates by price per replica (unpriced last; ties by provider, SKU, region)."""
    rejected: dict[tuple[str, str], list[Candidate]] = defaultdict(list)
    feasible: dict[tuple[str, str], list[Candidate]] = defaultdict(list)
    for c in candidates:
        if c["feasible"]:
            feasible[(c["workload"], c["gpu"])].append(c)
        else:
            rejected[(c["workload"], c["reason_kind"] or "other")].append(c)

    def groups(by: dict[tuple[str, str], list[Candidate]]) -> list[CandidateGroup]:
        return [CandidateGroup(workload=w, group=g, count=len(items),
                               cheapest=sorted(items, key=_price_order)[:per_group])
                for (w, g), items in sorted(by.items())]

    return CandidateSummary(considered=len(candidates), feasible=sum(len(v) for v in feasible.values()),
                            per_group=per_group, by_reason=groups(rejected), by_gpu=groups(feasible))


def with_candidates(plan: Plan, form: CandidatesForm) -> Plan:
    """The plan with its candidate list as `form` asks: all (as solved), a summary, or none."""
    if form == "all":
        return plan.model_copy(update={"candidates_form": "all"})
    summary = summarise(plan.candidates) if form == "summary" else None
    return plan.model_copy(update={"candidates": [], "candidates_form": form, "candidate_summary": summary})
