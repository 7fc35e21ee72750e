"""CSP-DAG synthesis draws its compute operators uniformly (the paper's property): a chi-square goodness-of-fit test
at fixed seeds and a fixed sample size, independent of any golden file.

The seeds are fixed, so the statistic is the same on every run; what matters is the test's power: with about 100
draws per operator, one operator drawn twice as often, one never drawn, or ten drawn 1.3x as often fail it (the
last test shows it on the same counts).
"""

from __future__ import annotations

from collections import Counter

import pytest
from scipy.stats import chisquare

from drtriton_training.csp_dag import ComputeOp, ProgramSynthesizer

PROGRAMS = 3300
LEVEL = 3  # three draws per program: later draws see earlier results, so placement cannot bias the choice
SIGNIFICANCE = 1e-3

pytestmark = pytest.mark.slow  # about 10,000 draws, each a CP-SAT solve: 15-20 s


@pytest.fixture(scope="module")
def synthesizer() -> ProgramSynthesizer:
    return ProgramSynthesizer()


@pytest.fixture(scope="module")
def counts(synthesizer) -> Counter[str]:
    drawn: Counter[str] = Counter({name: 0 for name in synthesizer.operator_names})
    for seed in range(PROGRAMS):
        program = synthesizer.synthesize(LEVEL, seed)
        drawn.update(step.operator for step in program.dag.steps if isinstance(step, ComputeOp))
    return drawn


def uniformity_p_value(counts: Counter[str]) -> float:
    return float(chisquare(list(counts.values())).pvalue)  # expected: equal counts


def test_operators_are_drawn_uniformly(synthesizer, counts):
    assert set(counts) == set(synthesizer.operator_names)  # nothing outside the registry's choices
    assert sum(counts.values()) == PROGRAMS * LEVEL
    assert min(counts.values()) > 0, [name for name, count in counts.items() if count == 0]
    assert uniformity_p_value(counts) > SIGNIFICANCE, counts.most_common(5)


def test_the_test_sees_a_biased_draw(counts):
    expected = sum(counts.values()) / len(counts)
    names = [name for name, _ in sorted(counts.items())]
    doubled = Counter(counts)
    doubled[names[0]] += round(expected)
    never = Counter(counts)
    never[names[0]] = 0
    family = Counter(counts)
    for name in names[:10]:
        family[name] += round(0.3 * expected)
    for biased in (doubled, never, family):
        assert uniformity_p_value(biased) < SIGNIFICANCE
