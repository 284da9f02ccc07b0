"""Whole programs from the disk cache (llvm/runtime.py `compile_llvm`, kernel/call_plan.py,
kernel/program_key.py): a fresh process loads a stored program without planning it, runs it
to the same results as NumPy, and anything damaged or different is a miss, never a crash."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

import fgrad
import fgrad.lower  # noqa: F401  (registers the llvm compiler)
from fgrad import flags
from fgrad import Tensor
from fgrad.lower.kernel import call_plan, program_key
from fgrad.lower.llvm import disk_cache, threads
from fgrad.lower.llvm import runtime as llvm_runtime
from fgrad.transforms.jit_prim import open_jaxpr

RNG = np.random.default_rng(11)

# A training step (matmuls with fused epilogues, reductions, gradients), a scan whose body
# runs natively, a donated update and a conv's weight gradient (implicit GEMMs, whose
# packing routine only such programs link): each checked against NumPy in a fresh process.
SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np, fgrad
    from fgrad import Tensor
    from fgrad.lower.llvm.runtime import compile_stats
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    w = (rng.standard_normal((32, 16)) * 0.1).astype(np.float32)
    b = np.zeros(16, np.float32)

    def loss(w, b, x):
        return ((x @ w + b).relu() ** 2).mean()

    step = fgrad.jit(fgrad.grad(loss, argnums=(0, 1)), backend="llvm")
    gw, gb = [g.numpy() for g in step(Tensor(w), Tensor(b), Tensor(x))]
    h = np.maximum(x @ w + b, 0)
    np.testing.assert_allclose(gw, x.T @ (2 * h / h.size), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(gb, (2 * h / h.size).sum(0), rtol=1e-4, atol=1e-6)

    def cumulative(v):
        return fgrad.lax.scan(lambda c, r: (c * 0.5 + r, c), v[0] * 0, v)
    carry, ys = fgrad.jit(cumulative, backend="llvm")(Tensor(x))
    c, want = np.zeros(32, np.float32), []
    for r in x:
        want.append(c)
        c = c * np.float32(0.5) + r
    np.testing.assert_allclose(carry.numpy(), c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ys.numpy(), np.stack(want), rtol=1e-5, atol=1e-6)

    update = fgrad.jit(lambda p, g: p - 0.1 * g, backend="llvm", donate_argnums=0)
    p = update(Tensor(w), Tensor(gw)).numpy()
    np.testing.assert_allclose(p, w - np.float32(0.1) * gw, rtol=1e-6)
    # a conv step whose three products are implicit GEMMs (32 input channels, stride 1)
    img = rng.standard_normal((2, 32, 6, 6)).astype(np.float32)
    ker = rng.standard_normal((4, 32, 3, 3)).astype(np.float32)
    conv_grad = fgrad.jit(fgrad.grad(lambda i, k: (i.conv2d(k, padding=1) ** 2).sum(),
                                     argnums=1), backend="llvm")
    gk = conv_grad(Tensor(img), Tensor(ker)).numpy()
    win = np.lib.stride_tricks.sliding_window_view(
        np.pad(img, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3))
    out = np.einsum("nchwij,ocij->nohw", win, ker)
    np.testing.assert_allclose(gk, np.einsum("nohw,nchwij->ocij", 2 * out, win),
                               rtol=1e-4, atol=1e-3)
    digest = [float(np.abs(a).sum()) for a in (gw, gb, carry.numpy(), ys.numpy(), p, gk)]
    print(json.dumps({"stats": dict(compile_stats), "digest": digest}))
""")


def _run(cache: str) -> dict[str, Any]:
    env = dict(os.environ, FGRAD_CACHE_DIR=cache)
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_a_fresh_process_loads_whole_programs_and_gets_the_same_results(tmp_path: Any):
    cold, warm = _run(str(tmp_path)), _run(str(tmp_path))
    assert cold["stats"].get("program_hits", 0) == 0 and cold["stats"]["builds"] >= 4
    # the step, the update and the scan's native body come whole; the scan itself holds a
    # host step (its loop), so it is planned again, its entry object from disk
    assert warm["stats"]["program_hits"] >= 4 and warm["stats"].get("builds", 0) == 0
    assert warm["digest"] == cold["digest"]


def _jaxpr(fn: Any, *arrays: np.ndarray) -> Any:
    return open_jaxpr(fgrad.make_jaxpr(fn)(*[Tensor(a) for a in arrays]))[0]


def _mlp_jaxpr() -> Any:
    x = RNG.standard_normal((8, 5)).astype(np.float32)
    w = RNG.standard_normal((5, 3)).astype(np.float32)
    return _jaxpr(fgrad.grad(lambda w, x: (x @ w).tanh().sum()), w, x)


def test_keys_tell_programs_apart_and_match_retraced_ones(monkeypatch: Any) -> None:
    x = np.ones(7, np.float32)

    def key(jaxpr: Any, *context: str) -> str | None:
        return program_key.program_key(jaxpr, *context, program_key.tunables([threads]))

    a = key(_jaxpr(lambda v: v * 1.5, x))
    assert a is not None and a == key(_jaxpr(lambda v: v * 1.5, x))
    assert a != key(_jaxpr(lambda v: v * 1.5000001, x))
    assert a != key(_jaxpr(lambda v: v * 1.5, np.ones(8, np.float32)))
    assert a != key(_jaxpr(lambda v: v * 1.5, x), "another context")
    monkeypatch.setattr(threads, "MIN_PARALLEL_WORK", 64)
    assert a != key(_jaxpr(lambda v: v * 1.5, x))
    assert threads in llvm_runtime._PLANNING_MODULES


def test_a_parameter_without_an_exact_description_is_not_keyed() -> None:
    jaxpr = _mlp_jaxpr()
    eqn = jaxpr.eqns[0]
    eqn.params = {**eqn.params, "callback": lambda: None}
    assert program_key.program_key(jaxpr) is None


def _plan_of(jaxpr: Any) -> call_plan.CallPlan:
    return llvm_runtime.build(llvm_runtime.plan(jaxpr), jaxpr)[0].plan


def test_plans_round_trip_through_json() -> None:
    for jaxpr in (_mlp_jaxpr(), _jaxpr(lambda v: (v.exp() / v.exp().sum(), v.max()),
                                       RNG.standard_normal((300, 700)).astype(np.float32))):
        plan = _plan_of(jaxpr)
        assert plan.native_only
        assert call_plan.loads(call_plan.dumps(plan)) == plan


def _record(jaxpr: Any) -> dict[str, Any]:
    objects = call_plan.Objects("a" * 64, ("b" * 64,), ("gemm",))
    return json.loads(call_plan.dump_record(_plan_of(jaxpr), objects))


DAMAGE = {
    "an unknown value kind": lambda r: r["plan"]["values"][0].__setitem__(0, "evil"),
    "an index past the values": lambda r: r["plan"]["outputs"].append(10 ** 6),
    "a negative shape": lambda r: r["plan"]["values"][0].__setitem__(2, [-1]),
    "an unknown dtype": lambda r: r["plan"]["values"][0].__setitem__(3, "f128"),
    "a path as a key": lambda r: r.__setitem__("entry", "../../" + "a" * 58),
    "an entry that is no segment": lambda r: r["plan"]["steps"][0][2][0].__setitem__(0, "main"),
    "a read of a value never written": lambda r: (
        r["plan"]["values"].append(["fresh", -1, [1], "f32", ""]),
        r["plan"]["steps"][0][0].append(len(r["plan"]["values"]) - 1)),
    "a block too small": lambda r: r["plan"].__setitem__("blocks", [0] * len(
        r["plan"]["blocks"])),
    "another input shape": lambda r: r["plan"]["values"][0].__setitem__(2, [1, 2, 3]),
    "a string where a number goes": lambda r: r["plan"].__setitem__("inputs", "2"),
    "a missing field": lambda r: r.pop("symbols"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_record_is_refused(damage: str) -> None:
    jaxpr = _mlp_jaxpr()
    record = _record(jaxpr)
    call_plan.parse_record(json.dumps(record).encode(), jaxpr)  # intact: accepted
    assert record["plan"]["blocks"], "the damage needs a program with intermediates"
    DAMAGE[damage](record)
    with pytest.raises(ValueError):
        call_plan.parse_record(json.dumps(record).encode(), jaxpr)
    with pytest.raises(ValueError):
        call_plan.parse_record(b"\xff not json", jaxpr)


def test_a_record_that_points_at_missing_objects_is_rebuilt(tmp_path: Any,
                                                            monkeypatch: Any) -> None:
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(tmp_path))
    x = RNG.standard_normal((33, 17)).astype(np.float32)
    fn = fgrad.jit(lambda v: (v * 3.25).softmax(axis=1), backend="llvm")
    want = fn(Tensor(x)).numpy()
    llvm_runtime.clear_memory_cache()
    for name in os.listdir(tmp_path / "llvm_kernels"):
        os.remove(tmp_path / "llvm_kernels" / name)
    before = dict(llvm_runtime.compile_stats)
    again = fgrad.jit(lambda v: (v * 3.25).softmax(axis=1), backend="llvm")(Tensor(x))
    assert llvm_runtime.compile_stats["program_hits"] == before.get("program_hits", 0)
    np.testing.assert_array_equal(again.numpy(), want)
    assert os.listdir(tmp_path / "llvm_kernels")  # compiled and stored again


def test_programs_with_host_steps_are_not_stored(tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(tmp_path))
    x = RNG.standard_normal((6, 4)).astype(np.float32)
    jaxpr = _jaxpr(lambda v: fgrad.lax.scan(lambda c, r: (c + r, c), v[0], v), x)
    exe = llvm_runtime.compile_llvm(jaxpr)
    carry, _ = exe(x)  # compiles the loop's body
    np.testing.assert_allclose(carry, x[0] + x.sum(0), rtol=1e-5)
    assert not exe.plan.native_only
    key = program_key.program_key(jaxpr, llvm_runtime._toolchain_and_host(),
                                  flags.gemm_library(),
                                  program_key.tunables(llvm_runtime._PLANNING_MODULES))
    assert key is not None and disk_cache.load(key, llvm_runtime.PROGRAMS) is None
    assert os.listdir(tmp_path / llvm_runtime.PROGRAMS)  # the scan's native body is there


def test_without_readable_sources_nothing_is_cached_whole(monkeypatch: Any) -> None:
    monkeypatch.setattr(program_key, "package_signature", lambda: "")
    assert program_key.program_key(_mlp_jaxpr()) is None
