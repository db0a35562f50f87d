"""Offline editor: parameterised edit operators keyed to root causes, so evolution runs with no API.

Every cause of a benchmark's rules module (`Benchmark.rules`) has a few operator variants, each a
different mechanism (a skill, a hint, a guard or recovery rule, a code hook, a tool-view or memory
change). A candidate targets 2-3 related causes (one family of the rules, best supported first)
and takes variant v of each cause's operators, so variants 0, 1, 2 of the same target give
distinct children. Everything is deterministic: the same parent, clusters and variant give the
same patch.
"""

from __future__ import annotations

from envs.registry import rules
from harness_pool.diagnosis import Cluster
from harness_pool.patch import HarnessPatch, parse_patch

VARIANTS = 3  # operator variants per cause


def operators_for(benchmark: str) -> dict[str, list[list[dict]]]:
    """The offline operators of a benchmark: cause -> variants."""
    return rules(benchmark).OPERATORS


def family_of(benchmark: str) -> dict[str, str]:
    """cause -> family name, for a benchmark's causes."""
    return {cause: family for family, causes in rules(benchmark).FAMILIES.items() for cause in causes}


def target_groups(clusters: list[Cluster], benchmark: str, max_causes: int = 3) -> list[list[Cluster]]:
    """Related clusters grouped by family (up to `max_causes` each), best supported family first."""
    families: dict[str, list[Cluster]] = {}
    operators, family = operators_for(benchmark), family_of(benchmark)
    for c in clusters:
        if c.cause in operators:
            families.setdefault(family.get(c.cause, c.cause), []).append(c)
    groups = [sorted(cs, key=lambda c: (-c.support, c.cause))[:max_causes] for cs in families.values()]
    return sorted(groups, key=lambda g: (-sum(c.support for c in g), g[0].cause))


def offline_patch(target: list[Cluster], variant: int, name: str, benchmark: str) -> HarnessPatch:
    """Variant `variant` of the operators for every targeted cause, as one patch."""
    edits, seen = [], set()
    operators = operators_for(benchmark)
    for c in target:
        options = operators[c.cause]
        for edit in options[variant % len(options)]:
            key = repr(edit)
            if key not in seen:  # two causes may share an operator (e.g. the table-quoting hook)
                seen.add(key)
                edits.append(edit)
    causes = [c.cause for c in target]
    return parse_patch(
        {
            "name": name,
            "description": f"offline operators v{variant} for {', '.join(causes)}",
            "root_causes": causes,
            "edits": edits,
        }
    )
