"""What a sweep may bill before it runs (`--plan`): each point's time limit and the price that bounds it.

No model of compile or step times: the sweep kills a point at its limit, so limit x the instance's hourly price
is the most a point can cost, and a suite's bound is its points' limits, `jobs` of them at a time.
"""

from __future__ import annotations

import math

from study.sweep import precompile
from study.sweep.suites import Suite, expand, timeout_of

DEFAULT_INSTANCE = {"trainium": "trn1.2xlarge", "nvidia": "g6.xlarge"}


def price(instance: str) -> tuple[float, str]:
    """Return the instance's on-demand price in USD per hour and its source (study.cost)."""
    from study import cost

    return cost.instance_price(instance)


def bounds(suites: list[Suite], variant: str, target: str) -> list[tuple[str, list[str], float, int]]:
    """Return (suite, run names, limit per run in s, runs at once) for each suite, precompile's trials first."""
    out = []
    trials = precompile.trials(suites, variant) if target == "trainium" else []
    if trials:
        out.append(("precompile", [t.point for t in trials], precompile.TRIAL_TIMEOUT_S, 1))
    for suite in suites:
        names = [p.run_name for p in expand(suite, variant)]
        if names:
            out.append((suite.name, names, timeout_of(suite, variant), suite.variants[variant].get("jobs", 1)))
    return out


def plan_text(suites: list[Suite], variant: str, target: str, instance: str | None, command: str) -> str:
    """Return the plan: per suite its points, each one's limit and price, and the bound of the whole sweep."""
    instance = instance or DEFAULT_INSTANCE[target]
    usd_per_h, source = price(instance)
    lines = [
        f"Plan of `{command}` on {instance} at ${usd_per_h:g}/h ({source}); nothing was run.",
        "Every run is killed at its limit: the hours and dollars below bound the sweep, they do not estimate it.",
    ]
    total_s = 0.0
    for name, runs, limit_s, jobs in bounds(suites, variant, target):
        bound_s = math.ceil(len(runs) / jobs) * limit_s
        total_s += bound_s
        lines += [
            "",
            f"## {name}: {len(runs)} runs, {jobs} at a time, each stopped at {limit_s:,.0f} s "
            f"(${limit_s / 3600 * usd_per_h:.2f}): at most {bound_s / 3600:.2f} h, ${bound_s / 3600 * usd_per_h:.2f}",
            *(f"  {run}" for run in runs),
        ]
    lines += ["", f"Whole sweep: at most {total_s / 3600:.2f} h, ${total_s / 3600 * usd_per_h:.2f} on {instance}"]
    return "\n".join(lines)
