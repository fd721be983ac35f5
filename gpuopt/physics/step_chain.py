"""The prompt work each engine step carries when a long step gathers the prompts of a later one.

vLLM schedules the prompts that arrived during step n into step n + 1 (n + 2 under async scheduling, whose
interleaved chains have the same stationary law): a step that carries prompts is long, more prompts arrive
during it, and the step they ride in is long in turn. Counting a step's prompts as Poisson at the mean y
(analytic_load._StepMix.counted_steps) gets the mean step nearly right (1-2 % short) but not its spread, nor
how the prompts bunch -- fewer steps carry them, each more (since 2026-12-04 an open loop's steps are the
chain's: _StepMix.settle) -- and an arrival waits for the rest of the step in flight, E[T^2] / 2 E[T]:
Llama-3.3-70B TP4 at 3,000 / 300 tokens on H100s at 2.2 requests/s runs prompt steps of 286 ms (sd 106) in
the simulator, 261 (sd 56) counted at the mean; the rest of the step in flight is 94.5 ms simulated, 80.2
counted at the mean, 94.7 by this chain.

The chain's state is the prompt work pending when a step is scheduled, in units of a prompt (at least quarters
where few prompts fit a step, as many as fit a step's room in whole units, so a prompt chunked at the budget
carries its rest to the next step: _StepMix._chain_units); a step takes up to
`most` units and lasts step_s[units]; the prompts that arrive during it (Poisson with mean rate x step, or
bursty clumps: the caller's arrival law) are pending for a later step. Its stationary law is one linear solve.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray


def poisson_terms(mean: float) -> int:
    """Poisson terms to n = mean + 8 sd + 10 (the tail beyond is below 1e-12 for the means met here)."""
    return int(mean + 8 * math.sqrt(mean) + 10)


def poisson_rows(means: NDArray[np.float64], terms: int) -> NDArray[np.float64]:
    """P(n) for n = 0 .. terms - 1, one row per mean, in logs (exp(-m) m^n / n! overflows its parts for the
    means of a busy engine); a mean of 0 is all its mass at n = 0."""
    n = np.arange(terms)
    log_factorials = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, terms)))))
    logs = n[None, :] * np.log(np.maximum(means, 1e-300))[:, None] - means[:, None] - log_factorials[None, :]
    logs = np.where(means[:, None] > 0, logs, np.where(n[None, :] == 0, 0.0, -np.inf))
    return np.asarray(np.exp(logs), dtype=np.float64)


ArrivalRows = Callable[[NDArray[np.float64], int], NDArray[np.float64]]
"""P(n prompts arrive) for n = 0 .. terms - 1, one row per mean count (poisson_rows for Poisson arrivals)."""


def transitions(carry: NDArray[np.int64], units_per_prompt: int,
                arrivals: NDArray[np.float64]) -> NDArray[np.float64]:
    """The chain's transition matrix over states 0 .. K (K = len(carry) - 1, the last holding everything past
    it): from state k, carry[k] units stay pending and n prompts of `units_per_prompt` units arrive with
    probability arrivals[k, n]; what would pass the last state, and the arrival law's uncounted tail, piles
    into it. Shared by the stationary law here and the decode window's walk (decode_window.window_factor)."""
    size = carry.size
    k = np.arange(size)
    dest = carry[:, None] + units_per_prompt * np.arange(arrivals.shape[1])[None, :]
    inside = dest < size - 1  # distinct within a row (units_per_prompt >= 1): set at once
    moves = np.zeros((size, size))
    moves[np.broadcast_to(k[:, None], dest.shape)[inside], dest[inside]] = arrivals[inside]
    moves[:, size - 1] += (np.where(inside, 0.0, arrivals).sum(axis=1)
                           + np.clip(1.0 - arrivals.sum(axis=1), 0.0, None))
    return moves


def stationary(step_s: NDArray[np.float64], most: int, units_per_prompt: int, rate: float, idle: float,
               arrivals: ArrivalRows = poisson_rows) -> NDArray[np.float64]:
    """The stationary law of the pending prompt work at a step's scheduling, in units: state k (0 .. K,
    K = len(step_s) - 1, the last state holding everything past it) schedules min(k, most) units in a step of
    step_s[k] seconds and carries the rest; the prompts arriving during it, `arrivals` at a mean of rate x
    step_s[k], add `units_per_prompt` units each. With nothing pending the engine is idle with probability
    `idle` (nothing decodes either): it waits for the next arrival and schedules that prompt alone at once."""
    size = step_s.size
    terms = (size - 1) // units_per_prompt + 2  # the last count reaches the last state from any carry
    moves = transitions(np.maximum(np.arange(size) - most, 0), units_per_prompt, arrivals(rate * step_s, terms))
    moves[0] *= 1.0 - idle
    moves[0, min(units_per_prompt, size - 1)] += idle
    # pi (moves - I) = 0 with sum(pi) = 1: the last balance equation is implied by the others
    system = moves.T - np.eye(size)
    system[-1, :] = 1.0
    rhs = np.zeros(size)
    rhs[-1] = 1.0
    law: NDArray[np.float64] = np.clip(np.linalg.solve(system, rhs), 0.0, None)
    law /= law.sum()
    return law


def rest_of_step(law: NDArray[np.float64], step_s: NDArray[np.float64], rate: float,
                 idle: float) -> tuple[float, float]:
    """What an arrival at a random instant finds left of the step in flight, (in a step without prompts, in a
    prompt step): E[T^2] / 2 E[time] over the chain's steps (a random instant lands in a long step more
    often), the engine's idle spells (1 / rate each, `idle` of the steps with nothing pending) counted as
    time in which nothing is in flight."""
    time = float(law @ step_s) + float(law[0]) * idle * (1.0 / rate - step_s[0])
    squares = law * step_s * step_s / (2 * time)
    return float(squares[0]) * (1.0 - idle), float(squares[1:].sum())
