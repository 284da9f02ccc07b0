"""Conformance table: every registered primitive's rules checked against references.

For each primitive in `fgrad.core.primitive.REGISTRY` (samples in prim_samples.py):
(a) JVP vs central finite differences in float64 (non-differentiable primitives must return
    None tangents); (b) transpose of linear primitives by the dot-product identity
    <ct, L(t)> == <L^T(ct), t>; (c) the batch rule (through fgrad.vmap) vs a Python loop of
    eager calls, batching each argument at axis 0 and at its last axis, and all at once;
    (d) impl vs abstract_eval shapes and dtypes.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.core.ir import ShapedArray
from fgrad.core.primitive import REGISTRY, missing_rules
from fgrad.core.prims import UndefinedPrimal
from prim_samples import JVP_RAISES, NONDIFF, SAMPLES, SKIPS, Case

NAMES = sorted(REGISTRY)
SAMPLED = [n for n in NAMES if n in SAMPLES]
BATCH = 3


def outs_of(name: str, res: Any) -> list[Any]:
    return list(res) if REGISTRY[name].multiple_results else [res]


def bind(name: str, args: list[Any], params: dict) -> list[Any]:
    """Bind the primitive on Tensors (or tracers); always a list of outputs."""
    return outs_of(name, REGISTRY[name].bind(*args, **params))


def eager(name: str, args: list[np.ndarray], params: dict) -> list[np.ndarray]:
    return [o.numpy() for o in bind(name, [Tensor(a) for a in args], params)]


def cases(name: str, seed: int = 0) -> list[Case]:
    return SAMPLES[name](np.random.default_rng(seed))


def is_float(a: np.ndarray) -> bool:
    return np.asarray(a).dtype.kind == "f"


def vdot(a: Any, b: Any) -> float:
    return float(np.sum(np.asarray(a, np.float64) * np.asarray(b, np.float64)))


def case_ids(name: str) -> list[str]:
    return [f"{name}-{i}" for i in range(len(cases(name)))]


ALL_CASES = [(n, i) for n in SAMPLED for i in range(len(cases(n)))]
IDS = [f"{n}-{i}" for n, i in ALL_CASES]


# ---------------------------------------------------------------------------- registry

def test_every_primitive_has_a_sample() -> None:
    missing = [n for n in NAMES if n not in SAMPLES and n not in SKIPS]
    assert not missing, (f"primitives without a sample in tests/transforms/prim_samples.py "
                         f"(add one to SAMPLES, or to SKIPS naming the covering test): "
                         f"{missing}")
    stale = [n for n in list(SAMPLES) + list(SKIPS) if n not in REGISTRY]
    assert not stale, f"samples for primitives that are not registered: {stale}"
    for reason in SKIPS.values():
        assert "tests/transforms/test_" in reason


def test_registry_completeness() -> None:
    import fgrad.lower  # noqa: F401  (records the native lowerings in the registry)
    gaps = missing_rules()
    semantic = {n: [r for r in rules if not r.startswith("lowering:")]
                for n, rules in gaps.items()}
    semantic = {n: r for n, r in semantic.items() if r}
    assert not semantic, f"primitives missing semantic rules: {semantic}"
    lowering = {n: r for n, r in gaps.items() if any(x.startswith("lowering:") for x in r)}
    if lowering:
        listing = "\n".join(f"  {n}: {', '.join(r)}" for n, r in sorted(lowering.items()))
        pytest.xfail(f"{len(lowering)} primitives lack backend lowerings:\n{listing}")


def test_missing_rules_reports_a_gap() -> None:
    """missing_rules must notice a primitive without rules (it is not vacuous)."""
    from fgrad.core.primitive import Primitive
    prim = Primitive("test_only_missing_rules_probe", linear=True)
    try:
        gaps = missing_rules()[prim.name]
        for rule in ("abstract_eval", "impl", "jvp", "batch", "transpose"):
            assert rule in gaps
    finally:
        del REGISTRY[prim.name]


# ---------------------------------------------------------------------------- (d) abstract

@pytest.mark.parametrize("name,i", ALL_CASES, ids=IDS)
def test_impl_matches_abstract_eval(name: str, i: int) -> None:
    case = cases(name)[i]
    prim = REGISTRY[name]
    avals = [Tensor(a).aval for a in case.args]
    expected = prim.abstract_eval_list(*avals, **case.params)
    got = prim.impl_list(*[Tensor(a)._data for a in case.args], **case.params)
    assert len(got) == len(expected)
    for out, aval in zip(got, expected, strict=True):
        assert isinstance(aval, ShapedArray)
        assert np.shape(out) == aval.shape, f"{name}: impl shape vs abstract_eval"
        assert np.asarray(out).dtype == aval.dtype.np, f"{name}: impl dtype vs abstract_eval"


# ---------------------------------------------------------------------------- (a) jvp

def fd_jvp(name: str, case: Case, tangents: dict[int, np.ndarray]) -> list[np.ndarray]:
    def shifted(s: float) -> list[np.ndarray]:
        args = [a + s * tangents[k] if k in tangents else a for k, a in enumerate(case.args)]
        return eager(name, args, case.params)
    plus, minus = shifted(case.eps), shifted(-case.eps)
    return [(p - m) / (2 * case.eps) if is_float(p) else None
            for p, m in zip(plus, minus, strict=True)]


@pytest.mark.parametrize("name,i", ALL_CASES, ids=IDS)
def test_jvp_vs_finite_differences(name: str, i: int) -> None:
    case = cases(name)[i]
    rng = np.random.default_rng(1)
    if name in NONDIFF:
        check_jvp_is_none(name, case)
        return
    diff = [k for k, a in enumerate(case.args) if is_float(a)]
    assert diff, f"{name}: a differentiable primitive needs a float argument in its sample"
    tangents = {k: rng.normal(size=np.shape(case.args[k])).astype(case.args[k].dtype)
                for k in diff}

    def fn(*xs: Tensor) -> list[Tensor]:
        args = [Tensor(a) for a in case.args]
        for k, x in zip(diff, xs, strict=True):
            args[k] = x
        return bind(name, args, case.params)

    primals = tuple(Tensor(case.args[k]) for k in diff)
    if name in JVP_RAISES:
        error, fragment = JVP_RAISES[name]
        with pytest.raises(error, match=fragment):
            fgrad.jvp(fn, primals, tuple(Tensor(tangents[k]) for k in diff))
        return
    _, out_dots = fgrad.jvp(fn, primals, tuple(Tensor(tangents[k]) for k in diff))
    expected = fd_jvp(name, case, tangents)
    for d, e in zip(out_dots, expected, strict=True):
        if e is None:
            assert not np.any(d.numpy()), f"{name}: integer output with a non-zero tangent"
            continue
        np.testing.assert_allclose(d.numpy(), e, rtol=case.tol, atol=case.tol,
                                   err_msg=f"{name}: jvp vs finite differences")


def check_jvp_is_none(name: str, case: Case) -> None:
    args = [Tensor(a) for a in case.args]
    dots = [Tensor(np.ones_like(a)) for a in case.args]
    out, out_dot = REGISTRY[name].rule("jvp")(args, dots, **case.params)
    tangents = out_dot if REGISTRY[name].multiple_results else [out_dot]
    assert all(t is None for t in tangents), f"{name}: jvp of a non-differentiable primitive"
    expected = eager(name, case.args, case.params)
    for o, e in zip(outs_of(name, out), expected, strict=True):
        np.testing.assert_array_equal(o.numpy(), e)


# ---------------------------------------------------------------------------- (b) transpose

def linear_groups(name: str, case: Case) -> tuple[tuple[int, ...], ...]:
    if not REGISTRY[name].linear:
        return ()
    if case.linear is not None:
        return case.linear
    return (tuple(k for k, a in enumerate(case.args) if is_float(a)),)


LINEAR_CASES = [(n, i) for n, i in ALL_CASES if linear_groups(n, cases(n)[i])]


@pytest.mark.parametrize("name,i", LINEAR_CASES, ids=[f"{n}-{i}" for n, i in LINEAR_CASES])
def test_transpose_dot_product_identity(name: str, i: int) -> None:
    case = cases(name)[i]
    rng = np.random.default_rng(2)
    prim = REGISTRY[name]
    for group in linear_groups(name, case):
        t = {k: rng.normal(size=np.shape(case.args[k])).astype(case.args[k].dtype)
             for k in group}
        args = [Tensor(t[k]) if k in t else Tensor(a) for k, a in enumerate(case.args)]
        outs = bind(name, args, case.params)
        cts = [Tensor(rng.normal(size=o.shape).astype(o.dtype.np)) for o in outs]
        undefined = [UndefinedPrimal(Tensor(a).aval) if k in t else Tensor(a)
                     for k, a in enumerate(case.args)]
        ct_arg = cts if prim.multiple_results else cts[0]
        in_cts = prim.rule("transpose")(ct_arg, *undefined, **case.params)
        assert len(in_cts) == len(case.args)
        lhs = sum(vdot(c.numpy(), o.numpy()) for c, o in zip(cts, outs, strict=True))
        rhs = 0.0
        for k in group:
            if in_cts[k] is not None:
                assert in_cts[k].shape == np.shape(case.args[k])
                assert in_cts[k].dtype == Tensor(case.args[k]).dtype
                rhs += vdot(in_cts[k].numpy(), t[k])
        single = any(np.asarray(a).dtype == np.float32 for a in case.args) or \
            any(o.dtype.np == np.float32 for o in outs)
        tol = 1e-4 if single else 1e-9
        assert lhs == pytest.approx(rhs, rel=tol, abs=tol), f"{name}: group {group}"


# ---------------------------------------------------------------------------- (c) batch

def batch_specs(case: Case) -> list[tuple[Any, ...]]:
    """in_axes tuples: each argument alone at axis 0 and at its last axis, then all."""
    n = len(case.args)
    specs = []
    for k, a in enumerate(case.args):
        for axis in sorted({0, np.ndim(a)}):
            specs.append(tuple(axis if j == k else None for j in range(n)))
    if n > 1:
        specs.append((0,) * n)
        specs.append(tuple(np.ndim(a) if j % 2 else 0 for j, a in enumerate(case.args)))
    return specs


BATCH_CASES = [(n, i) for n, i in ALL_CASES if cases(n)[i].args]


@pytest.mark.parametrize("name,i", BATCH_CASES, ids=[f"{n}-{i}" for n, i in BATCH_CASES])
def test_batch_rule_vs_loop(name: str, i: int) -> None:
    examples = [cases(name, seed)[i] for seed in range(BATCH)]
    params = examples[0].params
    for spec in batch_specs(examples[0]):
        per_example = [[ex.args[k] if ax is not None else examples[0].args[k]
                        for k, ax in enumerate(spec)] for ex in examples]
        expected = [np.stack(outs) for outs in
                    zip(*[eager(name, args, params) for args in per_example], strict=True)]
        stacked = [np.stack([ex[k] for ex in per_example], axis=ax) if ax is not None
                   else examples[0].args[k] for k, ax in enumerate(spec)]
        got = fgrad.vmap(lambda *xs: bind(name, list(xs), params), in_axes=spec)(
            *[Tensor(a) for a in stacked])
        for g, e in zip(got, expected, strict=True):
            assert g.dtype.np == e.dtype, f"{name} in_axes={spec}"
            np.testing.assert_allclose(g.numpy(), e, rtol=1e-12, atol=1e-12, equal_nan=True,
                                       err_msg=f"{name} in_axes={spec}")
