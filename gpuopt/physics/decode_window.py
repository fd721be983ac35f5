"""The steps a request decodes in right after its prefill: the prompts queued behind it come first.

The analytic model's TPOT is a mean over steps (analytic_load._StepMix): a share of the steps carries prompts,
in proportion to the prompts arriving. A request's decode does not start at a random step, though: it starts
when its own prefill ends, and the prompts that arrived while it waited and prefilled are queued behind it
(first come, first served). vLLM runs them in the next steps beside its decode, one prompt step each, so a
request with few output tokens decodes mostly in prompt steps: 8,192-token prompts with 16 output tokens on an
H100 at 2 requests/s take a 265 ms step per prompt and the simulator's mean TPOT is 39 ms, where the mean step
is 16. Long outputs wash the start out (the window's mean tends to the mean step).

This module follows the prompt queue step by step over the window (a Markov chain on the prompt tokens
pending, in quarters of a prompt): a step carries the pending prompt tokens up to its room when any are and
lasts the plain step plus that share of the prompt step's extra time; prompts arrive (Poisson) during it. The
window starts from the prompts that arrived behind the request: those that came before its last prefill step
share that step's spare room (a prompt of 8,192 tokens at a budget of 8,192 leaves its last two tokens to a
step that takes the next prompt's 8,188); those that arrive during that step join the step after the next under
async scheduling (vLLM schedules step n+1 when step n launches). The window's mean step over the chain's own
stationary mean step is the factor the steady-state TPOT is multiplied by (`window_factor`).

Checked against the simulator (Llama-3.1-8B on an H100, prefill busy ~40-53 %): mean TPOT at 1,000 to 8,192
prompt tokens and 2 to 256 output tokens within -6..+13 % (8,192/2: 61 ms, simulated 55-59; 8,192/16: 37,
simulated 39; 8,000/16: 29, simulated 26), where the steady state alone was 49-72 % low on the short outputs
(tests/test_decode_window.py; docs/simulator.md "prompt-heavy shapes").
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from gpuopt.physics.step_chain import poisson_rows, poisson_terms, transitions

RESOLUTION = 4  # pending prompt work in quarters of a prompt
MAX_WINDOW_STEPS = 256  # past this many decode steps the chain has mixed: the rest are at its stationary mean
MAX_UNITS = 240  # the prompt work a window's chain follows, in units (60 prompt steps queued)
NEGLIGIBLE = 0.02
"""Below this estimated excess -- the prompts queued behind at the start, each a prompt step's extra time, over the
window's plain steps -- the factor is 1 without following the chain. The estimate bounds the excess the chain
finds (on the 10 workloads of benchmarks/solve_scaling.py: below 0.02 estimated, at most 1.8 % found), and
skipping it keeps `solve` within its time (3,590 chains in a 10-workload solve, 75 % of them below)."""


def _poisson(mean: float) -> NDArray[np.float64]:
    row: NDArray[np.float64] = poisson_rows(np.array([max(mean, 0.0)]), poisson_terms(mean))[0]
    return row


@lru_cache(maxsize=65536)
def window_factor(rate: float, prompt_tokens: int, output_tokens: int, plain_s: float, prompt_s: float,
                  prompt_step_tokens: float, queued_before: float, last_chunk: float, spare_room: float,
                  step_room: float, async_scheduling: bool) -> float:
    """Mean step of a request's decode window over the steady state's mean step (>= about 1).

    `rate`: prompts arriving per second behind the request (the others'); `plain_s` / `prompt_s`: a step
    without prompt tokens and one carrying `prompt_step_tokens` of them (_StepMix.steps); `queued_before`: the
    prompts expected to have arrived behind it before its last prefill step began; `last_chunk`: its prompt
    tokens in that step; `spare_room`: the budget left in it for prompts queued behind; `step_room`: the
    prompt tokens a step holds beside the decodes (the budget less the decode batch): a step takes every
    pending prompt token up to it, and lasts the plain step plus the prompt step's extra time per token."""
    steps = output_tokens - 1
    extra = prompt_s - plain_s
    if steps < 1 or rate <= 0 or extra <= 0 or prompt_step_tokens <= 0:
        return 1.0
    per_prompt = prompt_tokens / prompt_step_tokens  # prompt steps one prompt takes
    busy = rate * per_prompt * extra
    if busy >= 0.999:
        return 1.0  # no steady state: the caller reports the limit
    # screen: the prompts queued behind at the start, each a prompt step's extra time, over the window
    backlog = queued_before + rate * (plain_s + extra * last_chunk / prompt_step_tokens)
    estimate = backlog * per_prompt * extra / (steps * plain_s)
    if estimate < NEGLIGIBLE:
        return 1.0
    # from NEGLIGIBLE to twice it the chain's stretch is phased in, so TPOT stays continuous in the rate (a step
    # at the screen broke the bisections that find a closed loop's rate for a number of clients)
    blend = min((estimate - NEGLIGIBLE) / NEGLIGIBLE, 1.0)
    # a prompt is RESOLUTION units exactly (units of the prompt step rounded a prompt of 1.5 steps' quarters to
    # 1 or 2 prompts by a hair of the rate: a 5 % jump in TPOT that stopped a closed loop's bisection)
    a = RESOLUTION
    unit = prompt_tokens / a  # tokens in one state unit
    per_unit = extra * unit / prompt_step_tokens  # a unit's share of a prompt step's extra time
    # room for the backlog and the arrivals of a busy period four times the mean one, in units
    size = int(a * (queued_before + 3 * math.sqrt(queued_before + 1) + 4 / (1 - busy))) + a + 1
    most = max(1, round(step_room / unit))  # units one step can take (8,190 of room holds a 8,192 prompt)
    size = min(max(size, 4 * a, 2 * most), MAX_UNITS)
    k = np.arange(size)
    served = np.minimum(k, most)
    duration = plain_s + per_unit * served
    # transition: from k, `served` units leave and n ~ Poisson(rate x duration) prompts of `a` units arrive
    # (what would pass the last state stays there: the chain's truncation)
    means = rate * (plain_s + per_unit * np.arange(most + 1))
    terms = poisson_terms(float(means[-1]))
    T = transitions(k - served, a, poisson_rows(means, terms)[served])  # each state's arrival probabilities
    # the start: n1 ~ Poisson(queued_before) queued before the last prefill step, which takes up to
    # spare_room of their tokens and lasts accordingly; n2 ~ Poisson(rate x that step) arrive during it
    start = np.zeros(size)
    first = 0.0
    for n1, p1 in enumerate(_poisson(queued_before)):
        if p1 < 1e-12:
            continue
        absorbed = min(spare_room, n1 * prompt_tokens)
        base = min(max(round((n1 * prompt_tokens - absorbed) / unit), 0), size - 1)
        last_step = plain_s + extra * min((last_chunk + absorbed) / prompt_step_tokens, 1.0)
        arrivals = np.zeros(size)
        pmf = _poisson(rate * last_step)[: (size - 1) // a + 1]
        arrivals[: a * len(pmf): a] = pmf
        if async_scheduling:  # they join from the second decode step on: the first step is `base`'s
            first += p1 * float(duration[base])
            begin = T[base]
        else:
            begin = np.zeros(size)
            begin[base] = 1.0
        spread = np.convolve(begin, arrivals)
        start[:size - 1] += p1 * spread[:size - 1]
        start[size - 1] += p1 * float(spread[size - 1:].sum())
    # the chain's stationary mean step, by flow balance (the units a step serves on average are the units that
    # arrive during it: rate x a x per_unit of the time goes to prompt work)
    mean_step = plain_s / (1.0 - rate * a * per_unit)
    weight = max(float(start.sum()), 1e-300)
    dist, total, done = start / weight, first / weight, 1 if async_scheduling else 0
    settled = 0
    for step in range(done, steps):
        current = float(dist @ duration)
        total += current
        if step >= MAX_WINDOW_STEPS:
            total += (steps - step - 1) * current
            break
        moved = dist @ T
        # mixed: the chain's distribution has stopped moving (two steps in a row within 1e-4 in total
        # variation), and the rest of the window is at its step. Not "the step within 0.2 % of mean_step": the
        # truncated chain settles a little off the flow balance (0.988 of it for Llama-3.1-8B at 6,000/500 on two
        # RTX 4090s), so the window ran to MAX_WINDOW_STEPS, except at rates where it crossed the band on its
        # way, which filled the rest 1.2 % higher: a jump in TPOT a closed loop's bisection could not cross (63.67
        # clients planned as 64, QA). Nor "the step stopped moving": every state past one step's room lasts the
        # longest step, so the step stands still while a deep backlog drains (review: 3.87 for 1.72)
        settled = settled + 1 if float(np.abs(moved - dist).sum()) <= 1e-4 else 0
        dist = moved
        if settled >= 2:
            total += (steps - step - 1) * float(dist @ duration)
            break
    # a window that starts behind an emptied queue (the request's last step took the prompts waiting) would be
    # a little faster than the steady state; not credited: the steady state's TPOT is the floor
    stretch = max(total / (steps * mean_step), 1.0) if mean_step > 0 else 1.0
    return 1.0 + (stretch - 1.0) * blend
