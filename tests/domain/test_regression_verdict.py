"""The paired regression verdict (RFC 0244 section F; docs/gate.md).

`evalops.domain.regression.paired_verdict` pairs tasks by id (only tasks present in both
builds), reports `pairedTaskCount`, and says `inconclusive` whenever its method cannot
separate the runs at alpha. The expected p-values are computed here with scipy.stats
directly (and, for McNemar, with statsmodels' exact test too). Then the verdict inside the
gate (pure and at the CLI) and the `evalops compare` command.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar  # type: ignore[import-untyped]

from evalops.domain.regression import (
    EXACT_BELOW,
    TaskOutcome,
    binomial_two_sided,
    paired_verdict,
)
from tests.conftest import Cli
from tests.decide import evaluate
from tests.domain.test_gate_evaluate import baseline, make_inputs, task
from tests.helpers import REPO_ROOT, commit_all
from tests.services.test_gate import MANY, alt_policy, base_workspace, copy_workspace, gate, sql

KEYS = {"verdict", "method", "alpha", "pairedTaskCount", "pValue"}
VERDICTS = {"improved", "regressed", "unchanged", "inconclusive"}


def from_table(a: int, b: int, c: int, d: int) -> tuple[dict[str, TaskOutcome], ...]:
    """(baseline, candidate) per-task pass from a 2x2 table: a both pass, b baseline only,
    c candidate only, d neither."""
    pairs = [(True, True)] * a + [(True, False)] * b + [(False, True)] * c + [(False, False)] * d
    base = {f"t{i:03}": TaskOutcome(x, float(x)) for i, (x, _) in enumerate(pairs)}
    cand = {f"t{i:03}": TaskOutcome(y, float(y)) for i, (_, y) in enumerate(pairs)}
    return base, cand


def from_scores(
    base_scores: Sequence[float], cand_scores: Sequence[float]
) -> tuple[dict[str, TaskOutcome], ...]:
    base = {f"t{i:03}": TaskOutcome(True, s) for i, s in enumerate(base_scores)}
    cand = {f"t{i:03}": TaskOutcome(True, s) for i, s in enumerate(cand_scores)}
    return base, cand


def expected_verdict(p: float, alpha: float, worse: bool) -> str:
    if p < alpha:
        return "regressed" if worse else "improved"
    return "inconclusive"


# --------------------------------------------------------------------------- McNemar

TABLES = [
    # (a, b, c, d): both pass, baseline only, candidate only, neither
    (0, 6, 0, 0),
    (10, 5, 0, 1),
    (3, 6, 0, 2),
    (2, 0, 6, 2),
    (4, 10, 2, 4),
    (4, 2, 10, 4),
    (0, 1, 9, 0),
    (7, 20, 8, 3),
    (1, 3, 3, 1),
    (0, 1, 0, 0),
    (12, 9, 3, 0),
    (30, 25, 12, 5),
    (3, 7, 1, 3),
    (0, 5, 0, 0),
    (40, 2, 0, 1),
    (0, 18, 10, 0),
]


@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.1])
@pytest.mark.parametrize(("a", "b", "c", "d"), TABLES)
def test_mcnemar_agrees_with_scipy_and_statsmodels(
    a: int, b: int, c: int, d: int, alpha: float
) -> None:
    base, cand = from_table(a, b, c, d)
    out = paired_verdict(base, cand, method="mcnemar", alpha=alpha)

    p_scipy = stats.binomtest(b, b + c, 0.5).pvalue
    p_statsmodels = mcnemar([[a, b], [c, d]], exact=True).pvalue
    assert p_scipy == pytest.approx(p_statsmodels, rel=1e-12)
    assert set(out) >= KEYS
    assert out["method"] == "mcnemar"
    assert out["alpha"] == alpha
    assert out["pairedTaskCount"] == a + b + c + d
    assert out["pValue"] == pytest.approx(p_scipy, rel=1e-12)
    assert out["verdict"] == expected_verdict(p_scipy, alpha, worse=b > c)


def test_the_binomial_p_value_is_scipys_bit_for_bit_for_every_count() -> None:
    # Stored decisions hold scipy's p-values and replay byte for byte: below EXACT_BELOW
    # trials the value computed from binomial coefficients must be scipy's float exactly,
    # for every k; at and above it, scipy itself must be what answers.
    for n in range(1, EXACT_BELOW):
        for k in range(n + 1):
            expected = float(stats.binomtest(k, n, 0.5).pvalue)
            assert binomial_two_sided(k, n) == expected, (k, n)
    for n in range(EXACT_BELOW, 40):
        for k in range(n + 1):
            assert binomial_two_sided(k, n) == float(stats.binomtest(k, n, 0.5).pvalue), (k, n)


def test_the_exact_path_stops_where_scipy_stops_being_exact() -> None:
    # At 15 trials scipy's sum for k = 4 is one unit in the last place off the exact
    # 1941/16384: the bound is the first n where the two differ, so it cannot be raised
    # without this test failing.
    n = EXACT_BELOW
    exact = 2 * sum(math.comb(n, i) for i in range(5)) / 2**n
    assert exact == 1941 / 16384 == 0.11846923828125
    assert float(stats.binomtest(4, n, 0.5).pvalue) != exact
    assert binomial_two_sided(4, n) == float(stats.binomtest(4, n, 0.5).pvalue)


def test_a_mcnemar_verdict_on_a_small_suite_does_not_import_scipy() -> None:
    code = (
        "import sys\n"
        "from evalops.domain.regression import TaskOutcome, paired_verdict\n"
        "pairs = [(1, 1)] * 3 + [(1, 0)] * 6 + [(0, 1)] + [(0, 0)] * 2\n"
        "base = {f't{i}': TaskOutcome(bool(x), float(x)) for i, (x, _) in enumerate(pairs)}\n"
        "cand = {f't{i}': TaskOutcome(bool(y), float(y)) for i, (_, y) in enumerate(pairs)}\n"
        "out = paired_verdict(base, cand, method='mcnemar', alpha=0.05)\n"
        "out2 = paired_verdict(base, cand, method='sign-test', alpha=0.05)\n"
        "print(out['pValue'], out2['pValue'], 'scipy' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT
    )
    p_value, sign_p, imported = done.stdout.split()
    assert float(p_value) == float(stats.binomtest(6, 7, 0.5).pvalue)
    assert float(sign_p) == float(stats.binomtest(6, 7, 0.5).pvalue)
    assert imported == "False"


def test_mcnemar_with_no_discordant_pair_is_never_improved_or_regressed() -> None:
    base, cand = from_table(5, 0, 0, 5)
    out = paired_verdict(base, cand, method="mcnemar", alpha=0.05)
    assert out["pairedTaskCount"] == 10
    # the contract: inconclusive whenever the method cannot separate the runs; every pair being
    # identical is also fairly reported as unchanged (RFC 0244 lists both verdicts).
    assert out["verdict"] in ("unchanged", "inconclusive")
    assert out["pValue"] in (1.0, None)


# ---------------------------------------------------------------- sign test and paired t

SCORE_TABLES = [
    # (baseline meanScores, candidate meanScores)
    ([1.0] * 6, [0.6, 0.5, 0.9, 0.8, 0.7, 0.4]),
    ([0.2, 0.4, 0.5, 0.3, 0.6, 0.1, 0.2], [0.5, 0.6, 0.9, 0.35, 0.8, 0.3, 0.25]),
    ([0.5, 0.6, 0.7, 0.8, 0.9], [0.4, 0.7, 0.6, 0.85, 0.8]),
    ([0.9, 0.8, 0.9, 0.7, 0.95, 0.85, 0.9, 0.8], [0.7, 0.8, 0.6, 0.5, 0.9, 0.8, 0.7, 0.75]),
    ([0.5, 0.5, 0.5, 0.5], [0.55, 0.45, 0.5, 0.6]),
    ([0.3, 0.9, 0.4, 0.8, 0.6, 0.7, 0.2, 0.5, 0.6, 0.4],
     [0.35, 0.95, 0.45, 0.85, 0.7, 0.75, 0.3, 0.55, 0.6, 0.5]),
    ([0.9, 0.1], [0.1, 0.9]),
    ([0.7, 0.8, 0.6], [0.7, 0.8, 0.5]),
]  # fmt: skip


@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.2])
@pytest.mark.parametrize(("base_scores", "cand_scores"), SCORE_TABLES)
def test_sign_test_agrees_with_scipy(
    base_scores: list[float], cand_scores: list[float], alpha: float
) -> None:
    base, cand = from_scores(base_scores, cand_scores)
    out = paired_verdict(base, cand, method="sign-test", alpha=alpha)

    diffs = [y - x for x, y in zip(base_scores, cand_scores, strict=True)]
    pos = sum(1 for x in diffs if x > 0)
    neg = sum(1 for x in diffs if x < 0)
    assert set(out) >= KEYS
    assert out["method"] == "sign-test"
    assert out["pairedTaskCount"] == len(diffs)
    p = stats.binomtest(pos, pos + neg, 0.5).pvalue
    assert out["pValue"] == pytest.approx(p, rel=1e-12)
    assert out["verdict"] == expected_verdict(p, alpha, worse=neg > pos)


@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.2])
@pytest.mark.parametrize(("base_scores", "cand_scores"), SCORE_TABLES)
def test_paired_t_agrees_with_scipy(
    base_scores: list[float], cand_scores: list[float], alpha: float
) -> None:
    base, cand = from_scores(base_scores, cand_scores)
    out = paired_verdict(base, cand, method="paired-t", alpha=alpha)

    result = stats.ttest_rel(cand_scores, base_scores)
    mean_diff = math.fsum(y - x for x, y in zip(base_scores, cand_scores, strict=True))
    assert set(out) >= KEYS
    assert out["method"] == "paired-t"
    assert out["pairedTaskCount"] == len(base_scores)
    assert out["pValue"] == pytest.approx(float(result.pvalue), rel=1e-9)
    assert out["verdict"] == expected_verdict(float(result.pvalue), alpha, worse=mean_diff < 0)


def test_a_single_pair_is_inconclusive_for_every_method() -> None:
    base = {"t000": TaskOutcome(True, 1.0)}
    cand = {"t000": TaskOutcome(False, 0.0)}
    for method in ("mcnemar", "sign-test", "paired-t", "paired-bootstrap"):
        out = paired_verdict(base, cand, method=method, alpha=0.05, seed=1)
        assert out["pairedTaskCount"] == 1
        assert out["verdict"] == "inconclusive", method


@pytest.mark.parametrize("method", ["mcnemar", "sign-test", "paired-t", "paired-bootstrap"])
def test_no_shared_task_is_inconclusive_with_zero_pairs(method: str) -> None:
    base, _ = from_table(0, 6, 0, 0)
    cand = {f"other-{i}": TaskOutcome(False, 0.0) for i in range(6)}
    out = paired_verdict(base, cand, method=method, alpha=0.05, seed=1)
    assert out["pairedTaskCount"] == 0
    assert out["verdict"] == "inconclusive"


# ------------------------------------------------------------------------- pairing


@pytest.mark.parametrize("method", ["mcnemar", "sign-test", "paired-t"])
def test_only_shared_task_ids_are_paired(method: str) -> None:
    shared_base = {"t-a": 1.0, "t-b": 0.9, "t-c": 1.0, "t-d": 0.8, "t-e": 1.0, "t-f": 0.95}
    shared_cand = {"t-a": 0.0, "t-b": 0.2, "t-c": 0.1, "t-d": 0.0, "t-e": 0.3, "t-f": 0.05}
    base = {k: TaskOutcome(v > 0.5, v) for k, v in shared_base.items()}
    cand = {k: TaskOutcome(v > 0.5, v) for k, v in shared_cand.items()}
    # tasks only one build has: they would reverse the verdict if they were paired
    base.update({f"only-base-{i}": TaskOutcome(False, 0.0) for i in range(20)})
    cand.update({f"only-cand-{i}": TaskOutcome(True, 1.0) for i in range(20)})

    out = paired_verdict(base, cand, method=method, alpha=0.05)
    alone = paired_verdict(
        {k: base[k] for k in shared_base},
        {k: cand[k] for k in shared_cand},
        method=method,
        alpha=0.05,
    )

    assert out["pairedTaskCount"] == 6
    assert out == alone
    assert out["verdict"] == "regressed"


def test_an_unknown_method_is_refused() -> None:
    base, cand = from_table(1, 1, 1, 1)
    with pytest.raises(ValueError, match="method"):
        paired_verdict(base, cand, method="wilcoxon", alpha=0.05)


# ------------------------------------------------------------------- paired bootstrap

# Twelve pairs: the bootstrap needs at least ten (docs/gate.md).
CLEAR_DROP = (
    [0.9, 0.95, 0.85, 0.9, 1.0, 0.8, 0.9, 0.95, 0.85, 0.9, 0.95, 1.0],
    [0.6, 0.7, 0.5, 0.65, 0.6, 0.55, 0.6, 0.7, 0.5, 0.6, 0.7, 0.65],
)
NOISE = ([0.5, 0.6, 0.4, 0.7, 0.5, 0.6], [0.6, 0.5, 0.45, 0.6, 0.55, 0.65])


def test_paired_bootstrap_is_reproducible_for_a_fixed_seed_and_records_it() -> None:
    base, cand = from_scores(*NOISE)
    first = paired_verdict(base, cand, method="paired-bootstrap", alpha=0.05, seed=1234)
    again = paired_verdict(base, cand, method="paired-bootstrap", alpha=0.05, seed=1234)
    other = paired_verdict(base, cand, method="paired-bootstrap", alpha=0.05, seed=98765)
    assert first == again
    assert first["seed"] == 1234
    assert other["seed"] == 98765
    assert set(first) >= KEYS
    assert first["method"] == "paired-bootstrap"
    assert first["pairedTaskCount"] == 6
    assert first["verdict"] == "inconclusive"
    # Six pairs are below the bootstrap's minimum: no p-value is claimed, and it says why.
    assert first["pValue"] is None
    assert "at least 10 paired tasks" in first["reason"]


def test_paired_bootstrap_separates_a_clear_drop() -> None:
    base, cand = from_scores(*CLEAR_DROP)
    out = paired_verdict(base, cand, method="paired-bootstrap", alpha=0.05, seed=7)
    assert out["verdict"] == "regressed"
    # (count + 1) / (resamples + 1): never 0, however clear the drop.
    assert out["pValue"] == pytest.approx(1 / (out["resamples"] + 1))
    improved = paired_verdict(cand, base, method="paired-bootstrap", alpha=0.05, seed=7)
    assert improved["verdict"] == "improved"


# --------------------------------------------------------------------- inside the gate


def test_regressed_blocks_the_gate_and_the_decision_records_the_verdict() -> None:
    base_tasks = [
        task(f"t{i}", "critical", ["task_pass"], scores=[s]) for i, s in enumerate(CLEAR_DROP[0])
    ]
    cand_tasks = [
        task(f"t{i}", "critical", ["task_pass"], scores=[s]) for i, s in enumerate(CLEAR_DROP[1])
    ]
    for method in ("sign-test", "paired-t", "paired-bootstrap"):
        result = evaluate(
            make_inputs(cand_tasks, base=baseline(base_tasks, method=method, seed=99))
        )
        assert {t["effect"] for t in result["tasks"]} == {"pass"}
        regression = result["regression"]
        assert set(regression) >= KEYS
        assert regression["verdict"] == "regressed", method
        assert regression["method"] == method
        assert regression["pairedTaskCount"] == 12
        assert result["decision"] == "block", method
        if method == "paired-bootstrap":
            assert regression["seed"] == 99


def test_inconclusive_does_not_block_the_gate() -> None:
    base_tasks = [
        task(f"t{i}", "critical", ["task_pass"], scores=[s]) for i, s in enumerate(NOISE[0])
    ]
    cand_tasks = [
        task(f"t{i}", "critical", ["task_pass"], scores=[s]) for i, s in enumerate(NOISE[1])
    ]
    for method in ("mcnemar", "sign-test", "paired-t", "paired-bootstrap"):
        result = evaluate(make_inputs(cand_tasks, base=baseline(base_tasks, method=method)))
        assert result["regression"]["verdict"] in ("inconclusive", "unchanged"), method
        assert result["decision"] == "pass", method


# ----------------------------------------------------------------- `evalops compare`


@pytest.fixture(scope="module")
def reg_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_workspace(base_workspace(tmp_path_factory), tmp_path_factory.mktemp("cmp") / "ws")


def compare(cli: Cli, ws: Path, baseline_build: str, candidate: str, *extra: str) -> dict[str, Any]:
    before = sql(ws, "SELECT count(*) FROM audit_event")
    result = cli(
        "compare", "--baseline", baseline_build, "--candidate", candidate, "--suite", MANY,
        *extra, "--json", cwd=ws,
    )  # fmt: skip
    assert result.code == 0, result.stdout + result.stderr
    assert sql(ws, "SELECT count(*) FROM audit_event") == before  # nothing stored
    data: dict[str, Any] = result.json()
    assert set(data) >= KEYS
    assert data["verdict"] in VERDICTS
    return data


def test_compare_output_shape_and_verdict(reg_ws: Path, cli: Cli) -> None:
    data = compare(
        cli, reg_ws, "build-base", "build-lower", "--method", "sign-test", "--alpha", "0.05"
    )
    assert data["verdict"] == "regressed"
    assert data["method"] == "sign-test"
    assert data["alpha"] == 0.05
    assert data["pairedTaskCount"] == 6
    assert data["pValue"] == pytest.approx(stats.binomtest(0, 6, 0.5).pvalue, rel=1e-12)


def test_compare_reports_inconclusive_below_significance(reg_ws: Path, cli: Cli) -> None:
    data = compare(
        cli, reg_ws, "build-base", "build-lower", "--method", "sign-test", "--alpha", "0.01"
    )
    assert data["verdict"] == "inconclusive"
    assert data["alpha"] == 0.01
    assert data["pValue"] == pytest.approx(0.03125)


def test_compare_defaults_to_the_policy_method_and_alpha(reg_ws: Path, cli: Cli) -> None:
    data = compare(cli, reg_ws, "build-base", "build-many-fail")
    assert (data["method"], data["alpha"]) == ("mcnemar", 0.05)
    assert data["verdict"] == "regressed"
    assert data["pValue"] == pytest.approx(stats.binomtest(6, 6, 0.5).pvalue)
    unchanged = compare(cli, reg_ws, "build-base", "build-lower")  # every task passes in both
    assert unchanged["verdict"] in ("unchanged", "inconclusive")


def test_compare_pairs_only_tasks_with_trials_in_both_builds(reg_ws: Path, cli: Cli) -> None:
    data = compare(cli, reg_ws, "build-base", "build-partial", "--method", "sign-test")
    assert data["pairedTaskCount"] == 4
    assert data["pValue"] == pytest.approx(stats.binomtest(0, 4, 0.5).pvalue)
    assert data["verdict"] == "inconclusive"


def test_compare_paired_bootstrap_is_seeded_and_reproducible(reg_ws: Path, cli: Cli) -> None:
    args = ("--method", "paired-bootstrap", "--seed", "11")
    first = compare(cli, reg_ws, "build-base", "build-many-fail", *args)
    again = compare(cli, reg_ws, "build-base", "build-many-fail", *args)
    assert first == again
    assert first["seed"] == 11
    # Six paired tasks: below the bootstrap's minimum of ten, so never a (false) block.
    assert first["verdict"] == "inconclusive"
    assert "at least 10 paired tasks" in first["reason"]
    other = compare(
        cli, reg_ws, "build-base", "build-many-fail", "--method", "paired-bootstrap", "--seed", "12"
    )
    assert other["seed"] == 12


@pytest.mark.parametrize("extra", [("--method", "wilcoxon"), ("--alpha", "1.5"), ("--alpha", "0")])
def test_compare_refuses_a_bad_method_or_alpha(
    extra: tuple[str, ...], reg_ws: Path, cli: Cli
) -> None:
    result = cli(
        "compare", "--baseline", "build-base", "--candidate", "build-lower", "--suite", MANY,
        *extra, "--json", cwd=reg_ws,
    )  # fmt: skip
    assert result.code == 2, result.stdout
    assert result.json()["error"]["code"] == 2


def test_gate_with_a_paired_bootstrap_policy_records_the_seed_and_replays(
    reg_ws: Path, cli: Cli
) -> None:
    path = alt_policy(reg_ws, "bootstrap", method="paired-bootstrap")
    commit_all(reg_ws, "a registered bootstrap policy")
    assert cli("sync", cwd=reg_ws).code == 0
    path.unlink()  # registered, but not in force: the module's other tests keep theirs
    commit_all(reg_ws, "the release gate alone in force again")
    assert cli("sync", cwd=reg_ws).code == 0
    data = gate(
        cli, reg_ws, "build-lower", MANY, "--baseline", "build-base",
        "--policy", "release-gate-bootstrap", "--dry-run",
    )  # fmt: skip
    regression = data["regression"]
    assert regression["method"] == "paired-bootstrap"
    assert isinstance(regression["seed"], int)
    # Six paired tasks cannot carry a bootstrap verdict: inconclusive, so no false block.
    assert regression["verdict"] == "inconclusive"
    assert data["decision"] == "pass"


def test_paired_t_with_zero_variance_is_inconclusive_without_warnings() -> None:
    """Every task moved by the same amount: t is undefined, so no claim is made."""
    import warnings

    from evalops.domain.regression import TaskOutcome, paired_verdict

    base = {f"t{i}": TaskOutcome(True, 0.9) for i in range(4)}
    cand = {f"t{i}": TaskOutcome(True, 0.8) for i in range(4)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = paired_verdict(base, cand, method="paired-t", alpha=0.05)
    assert out["verdict"] == "inconclusive"
    assert out["pValue"] is None
    assert out["pairedTaskCount"] == 4


# ------------------------------------------------ whole outputs, derived with scipy here


def test_mcnemar_output_in_full() -> None:
    base, cand = from_table(3, 6, 1, 2)
    out = paired_verdict(base, cand, method="mcnemar", alpha=0.1)
    p = float(stats.binomtest(6, 7, 0.5).pvalue)
    assert out == {
        "verdict": "inconclusive" if p >= 0.1 else "regressed",
        "method": "mcnemar",
        "alpha": 0.1,
        "pairedTaskCount": 12,
        "pValue": p,
        "discordant": {"baselineOnlyPassed": 6, "candidateOnlyPassed": 1},
    }


def test_mcnemar_without_a_discordant_pair_is_unchanged_with_p_one() -> None:
    base, cand = from_table(4, 0, 0, 3)
    out = paired_verdict(base, cand, method="mcnemar", alpha=0.05)
    assert out == {
        "verdict": "unchanged",
        "method": "mcnemar",
        "alpha": 0.05,
        "pairedTaskCount": 7,
        "pValue": 1.0,
        "discordant": {"baselineOnlyPassed": 0, "candidateOnlyPassed": 0},
    }


def test_sign_test_output_in_full() -> None:
    base_scores = [0.5] * 8
    cand_scores = [0.9, 0.8, 0.7, 0.6, 0.5, 0.6, 0.7, 0.1]  # 6 up, 1 same, 1 down
    base, cand = from_scores(base_scores, cand_scores)
    out = paired_verdict(base, cand, method="sign-test", alpha=0.2)
    diffs = [c - b for b, c in zip(base_scores, cand_scores, strict=True)]
    p = float(stats.binomtest(6, 7, 0.5).pvalue)
    assert out == {
        "verdict": "improved" if p < 0.2 else "inconclusive",
        "method": "sign-test",
        "alpha": 0.2,
        "pairedTaskCount": 8,
        "pValue": p,
        "meanDifference": pytest.approx(math.fsum(diffs) / 8, rel=1e-12),
        "signs": {"positive": 6, "negative": 1, "zero": 1},
    }
    assert out["verdict"] == "improved"  # p = 0.125 < 0.2


def test_every_task_unchanged_by_score_is_unchanged_with_p_one() -> None:
    base, cand = from_scores([0.2, 0.7, 1.0], [0.2, 0.7, 1.0])
    for method in ("sign-test", "paired-t", "paired-bootstrap"):
        out = paired_verdict(base, cand, method=method, alpha=0.05)
        assert (out["verdict"], out["pValue"], out["meanDifference"]) == ("unchanged", 1.0, 0.0)


def test_paired_t_output_in_full() -> None:
    base_scores = [0.9, 0.8, 0.85, 0.95, 0.7, 0.9]
    cand_scores = [0.6, 0.7, 0.5, 0.9, 0.4, 0.65]
    base, cand = from_scores(base_scores, cand_scores)
    out = paired_verdict(base, cand, method="paired-t", alpha=0.05)
    ref = stats.ttest_rel(cand_scores, base_scores)
    ci = ref.confidence_interval(confidence_level=0.95)
    assert out == {
        "verdict": "regressed",
        "method": "paired-t",
        "alpha": 0.05,
        "pairedTaskCount": 6,
        "pValue": pytest.approx(float(ref.pvalue), rel=1e-12),
        "meanDifference": pytest.approx(-1.35 / 6, rel=1e-9),
        "interval": [pytest.approx(float(ci.low)), pytest.approx(float(ci.high))],
    }
    assert float(ref.pvalue) < 0.05 and float(ci.high) < 0


def test_paired_t_with_equal_differences_reports_the_shift_as_its_interval() -> None:
    base, cand = from_scores([0.5, 0.25, 0.75], [0.25, 0.0, 0.5])
    out = paired_verdict(base, cand, method="paired-t", alpha=0.05)
    assert (out["verdict"], out["pValue"]) == ("inconclusive", None)
    assert out["interval"] == [-0.25, -0.25]


@pytest.mark.parametrize(
    "cand_scores",
    [
        # Skewed differences: the percentile interval differs from other bootstrap intervals.
        [0.5, 0.5, 0.45, 0.5, 0.5, 0.55, 0.5, 0.5, 0.9, 1.0, 0.45, 0.95],
        # Differences of +-0.5: about a fifth of the resampled means are exactly 0, and a
        # mean of 0 counts on both sides of it.
        [1.0] * 7 + [0.0] * 5,
        [0.0] * 7 + [1.0] * 5,  # the same, below 0
    ],
)
def test_paired_bootstrap_output_in_full(cand_scores: list[float]) -> None:
    base_scores = [0.5] * 12
    diffs = [c - b for b, c in zip(base_scores, cand_scores, strict=True)]
    base, cand = from_scores(base_scores, cand_scores)
    out = paired_verdict(base, cand, method="paired-bootstrap", alpha=0.1, seed=11)
    ref = stats.bootstrap(
        (diffs,),
        lambda d, axis=-1: d.mean(axis=axis),
        n_resamples=9999,
        confidence_level=0.9,
        method="percentile",
        random_state=11,
    )
    dist = ref.bootstrap_distribution
    # Two-sided: resampled means on the far side of 0, doubled, at most every resample.
    count = min(9999, 2 * min(int((dist <= 0).sum()), int((dist >= 0).sum())))
    p = (count + 1) / (9999 + 1)
    low, high = float(ref.confidence_interval.low), float(ref.confidence_interval.high)
    significant = p < 0.1 and (low > 0 or high < 0)
    mean = math.fsum(diffs) / 12
    assert out == {
        "verdict": ("improved" if mean > 0 else "regressed") if significant else "inconclusive",
        "method": "paired-bootstrap",
        "alpha": 0.1,
        "pairedTaskCount": 12,
        "pValue": p,
        "meanDifference": pytest.approx(mean, rel=1e-12),
        "seed": 11,
        "interval": [low, high],
        "resamples": 9999,
    }


def test_paired_bootstrap_refusals_say_why_in_full() -> None:
    base, cand = from_scores([0.5] * 9, [0.4] * 8 + [0.3])
    few = paired_verdict(base, cand, method="paired-bootstrap", alpha=0.05, seed=3)
    assert few["reason"] == "paired-bootstrap needs at least 10 paired tasks, got 9"
    assert (few["verdict"], few["pValue"], few["seed"]) == ("inconclusive", None, 3)
    base, cand = from_scores([0.5] * 10, [0.25] * 10)
    flat = paired_verdict(base, cand, method="paired-bootstrap", alpha=0.05, seed=3)
    assert flat["reason"] == (
        "every paired difference is equal: the bootstrap cannot separate them"
    )
    assert (flat["verdict"], flat["pValue"]) == ("inconclusive", None)
    base, cand = from_scores([0.5] * 10, [0.25] * 9 + [0.3])
    ten = paired_verdict(base, cand, method="paired-bootstrap", alpha=0.05, seed=3)
    assert "reason" not in ten and ten["verdict"] == "regressed"


def test_an_unknown_method_is_named_with_the_known_ones() -> None:
    base, cand = from_table(1, 1, 1, 1)
    with pytest.raises(ValueError) as raised:
        paired_verdict(base, cand, method="wilcoxon", alpha=0.05)
    assert str(raised.value) == (
        "unknown method 'wilcoxon' (one of mcnemar, sign-test, paired-t, paired-bootstrap)"
    )


def test_the_bootstrap_seed_defaults_to_zero_and_is_recorded() -> None:
    base, cand = from_scores([0.5] * 10, [0.25 + 0.01 * i for i in range(10)])
    default = paired_verdict(base, cand, method="paired-bootstrap", alpha=0.05)
    assert default["seed"] == 0
    assert default == paired_verdict(base, cand, method="paired-bootstrap", alpha=0.05, seed=0)


def test_an_interval_that_is_not_finite_is_reported_as_null() -> None:
    """Scores far apart enough that the variance overflows: the interval is unbounded, and the
    output stays valid JSON (canonical JSON has no Infinity): null bounds, never infinities."""
    import warnings

    import rfc8785

    base, cand = from_scores([0.0, 0.0, 0.0], [1e308, -1e308, 0.5])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = paired_verdict(base, cand, method="paired-t", alpha=0.05)
    assert out["interval"] == [None, None]
    assert out["verdict"] == "inconclusive"
    rfc8785.dumps(out)


def test_a_paired_t_p_value_equal_to_alpha_is_not_significant() -> None:
    base_scores = [0.9, 0.8, 0.85, 0.95, 0.7, 0.9]
    cand_scores = [0.6, 0.7, 0.9, 0.9, 0.4, 0.65]
    base, cand = from_scores(base_scores, cand_scores)
    p = float(stats.ttest_rel(cand_scores, base_scores).pvalue)
    assert 0 < p < 1
    assert paired_verdict(base, cand, method="paired-t", alpha=p)["verdict"] == "inconclusive"
    above = paired_verdict(base, cand, method="paired-t", alpha=math.nextafter(p, 1.0))
    assert above["verdict"] == "regressed"


def test_a_bootstrap_p_value_equal_to_alpha_is_not_significant() -> None:
    """Every resampled mean below 0: count 0, p = 1 / 10000 exactly. At alpha = p the verdict
    is inconclusive (p < alpha), whatever the interval says; just above, regressed."""
    base, cand = from_scores([0.5] * 12, [0.2 - 0.01 * i for i in range(12)])
    at_p = paired_verdict(base, cand, method="paired-bootstrap", alpha=1 / 10000, seed=5)
    assert at_p["pValue"] == 1 / 10000
    assert at_p["interval"][1] < 0  # the interval alone would separate them
    assert at_p["verdict"] == "inconclusive"
    above = paired_verdict(
        base, cand, method="paired-bootstrap", alpha=math.nextafter(1 / 10000, 1.0), seed=5
    )
    assert above["verdict"] == "regressed"


def test_bootstrap_p_value_counts_resampled_means_equal_to_zero_as_the_far_side() -> None:
    """docs/gate.md: the bootstrap p-value is the share of resampled mean differences at or
    beyond 0 on the far side of the observed mean, doubled. Three of ten tasks lost a full
    point and seven did not move: every resampled mean is at most 0, and one is exactly 0
    when the resample draws none of the three, with probability 0.7**10 (about 0.028). Those
    zeros are the far side: p is near 2 * 0.7**10, not the 1/10000 of a far side without
    them. The band is four binomial standard deviations of 9999 resamples wide each way."""
    base = {f"t{i}": TaskOutcome(True, 1.0 if i < 3 else 0.5) for i in range(10)}
    cand = {f"t{i}": TaskOutcome(True, 0.0 if i < 3 else 0.5) for i in range(10)}
    out = paired_verdict(base, cand, method="paired-bootstrap", alpha=0.05, seed=3)
    share = 0.7**10
    sd = math.sqrt(share * (1 - share) / 9999)
    assert 2 * (share - 4 * sd) <= out["pValue"] <= 2 * (share + 4 * sd)
