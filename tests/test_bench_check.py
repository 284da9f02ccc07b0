"""bench/check.py: the regression rule of `bench/run.py --check` on made-up rows (no timing)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "bench"))

import check  # noqa: E402
from harness import Row  # noqa: E402


def _row(label: str, numpy_ms: float, llvm_ms: float) -> Row:
    return Row(label, {}, results={"numpy": numpy_ms, "fgrad-llvm": llvm_ms})


def test_flags_only_ratios_at_least_factor_times_the_baseline(tmp_path: Path) -> None:
    path = str(tmp_path / "baseline.json")
    check.write_baseline([_row("W3", 10.0, 5.0), _row("W4", 2.0, 2.0)], "made up", path)
    base = check.load_baseline(path)
    assert base == {"W3 | fgrad-llvm": 0.5, "W4 | fgrad-llvm": 1.0}
    # same load on both: W3 0.7x NumPy (1.4x worse, not flagged); W4 1.5x (flagged)
    found = check.regressions([_row("W3", 20.0, 14.0), _row("W4", 4.0, 6.0)], base)
    assert len(found) == 1 and found[0].startswith("REGRESSION W4 | fgrad-llvm")


def test_errors_and_unknown_workloads_are_not_compared() -> None:
    rows = [Row("W9", {}, results={"numpy": 1.0, "fgrad-llvm": "error: boom"}),
            _row("W10", 1.0, 100.0)]
    assert check.regressions(rows, {"W9 | fgrad-llvm": 0.1}) == []


def test_the_peak_probe_flags_a_run_whose_cores_were_shared() -> None:
    import peak
    assert peak.changed({1: 90.0, 2: 175.0}, {1: 88.0, 2: 168.0}) == ""
    warning = peak.changed({1: 90.0, 2: 170.0}, {1: 91.0, 2: 95.0})
    assert "170 to 95" in warning
    assert "<8 x float>" in peak.probe_ir(8) and peak.probe_ir(8).count("llvm.fma") == 13


def test_the_gemm_ceiling_loops_run_the_shipped_micro_kernel() -> None:
    """bench/gemm_ceiling.py: each loop runs (tiny work) and the synthetic k step has the
    micro-kernel's MR * NR/L FMAs."""
    import gemm_ceiling
    from fgrad.lower.llvm.gemm.native import tile_shape
    mr, nr, lanes = tile_shape(4)
    assert gemm_ceiling._k_step_ir(mr, nr // lanes, lanes, 16).count("@llvm.fma") \
        == mr * nr // lanes + 1   # the calls and the declaration
    saved = gemm_ceiling.WORK_FLOPS
    gemm_ceiling.WORK_FLOPS = 1e6
    try:
        found = gemm_ceiling.loops()
    finally:
        gemm_ceiling.WORK_FLOPS = saved
    assert list(found) == ["probe", "k steps", "tile column, L1", "driver block"]
    for call, flops in found.values():
        call()
        assert flops > 0


def test_a_regression_counts_only_when_the_second_measurement_flags_it_too() -> None:
    base = {"W3 | fgrad-llvm": 0.5, "W7 | fgrad-llvm": 2.0}
    first = check.flagged([_row("W3", 10.0, 9.0), _row("W7", 1.0, 4.0)], base)
    assert set(first) == {"W3 | fgrad-llvm", "W7 | fgrad-llvm"}
    again = check.flagged([_row("W3", 10.0, 9.5), _row("W7", 2.0, 4.0)], base)
    found = check.confirmed(first, again)
    assert len(found) == 1 and found[0].startswith("REGRESSION W3 | fgrad-llvm: 0.9x")
    assert "re-measured: 0.95x NumPy" in found[0]
