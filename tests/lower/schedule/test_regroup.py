"""Merging same-shape elementwise kernels across other steps (schedule/regroup.py): an Adam
update is one kernel per parameter shape, a merge never reorders a read before its write,
and results match NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import fgrad
from fgrad import Tensor, optim
from fgrad.lower.schedule.partition import KernelStep, fused_eqns, schedule
from fgrad.transforms.jit_prim import open_jaxpr

pytestmark = pytest.mark.backends
RNG = np.random.default_rng(5)


def _kernels(fn, *arrays) -> list[KernelStep]:
    jaxpr = open_jaxpr(fgrad.make_jaxpr(fn)(*arrays))[0]
    return [s for s in schedule(jaxpr).steps if isinstance(s, KernelStep)]


def _numpy_adam(p, g, m, v, t, lr=1e-2, b1=0.9, b2=0.999, eps=1e-8):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    step = lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return p - step, m, v


def _adam_problem(shapes):
    """NumPy parameters and gradients of these shapes, their Tensors, Adam's state and a
    function applying one Adam update: (params, grads, tparams, tgrads, state, update)."""
    params = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    opt = optim.Adam(lr=1e-2)

    def update(params, state, grads):
        updates, state = opt.update(grads, state, params)
        return optim.apply_updates(params, updates), state
    tparams, tgrads = [Tensor(p) for p in params], [Tensor(g) for g in grads]
    return params, grads, tparams, tgrads, opt.init(tparams), update


def test_adam_updates_one_kernel_per_parameter_shape(jit_backend: str) -> None:
    params, grads, tparams, tgrads, state, update = _adam_problem(
        [(6, 7), (7,), (7, 3), (3,), (7,)])
    kernels = _kernels(update, tparams, state, tgrads)
    by_shape = [k.shape for k in kernels if k.shape]
    assert sorted(by_shape) == [(3,), (6, 7), (7,), (7, 3)]
    assert all(len(k.outputs) >= 3 for k in kernels if k.shape)   # p, m and v together
    jitted = fgrad.jit(update)
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    want = [p.astype(np.float64) for p in params]
    for t in (1, 2, 3):
        tparams, state = jitted(tparams, state, tgrads)
        for i, g in enumerate(grads):
            want[i], m[i], v[i] = _numpy_adam(want[i], g.astype(np.float64), m[i], v[i], t)
    for got, expected in zip(tparams, want, strict=True):
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_kernels_merge_across_an_unrelated_gemm(jit_backend: str) -> None:
    x, w, y = (RNG.standard_normal((8, 8)).astype(np.float32) for _ in range(3))

    def f(x, w, y):
        return x * 2.0, x @ w, y * 3.0 + x
    kernels = _kernels(f, Tensor(x), Tensor(w), Tensor(y))
    assert len(kernels) == 1 and len(kernels[0].outputs) == 2
    a, g, c = fgrad.jit(f)(Tensor(x), Tensor(w), Tensor(y))
    np.testing.assert_allclose(a.numpy(), x * 2.0, rtol=1e-6)
    np.testing.assert_allclose(g.numpy(), x.astype(np.float64) @ w, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(c.numpy(), y * 3.0 + x, rtol=1e-6)


def test_no_merge_when_a_step_between_reads_one_and_writes_for_the_other(
        jit_backend: str) -> None:
    x, w = (RNG.standard_normal((8, 8)).astype(np.float32) for _ in range(2))

    def f(x, w):
        a = x * 2.0             # read by the gemm: cannot move after it
        g = a @ w
        return g + x * a        # reads the gemm's result: cannot move before it
    kernels = _kernels(f, Tensor(x), Tensor(w))
    assert [len(k.outputs) for k in kernels] == [1, 1]
    got = fgrad.jit(f)(Tensor(x), Tensor(w)).numpy()
    a = x.astype(np.float64) * 2
    np.testing.assert_allclose(got, a @ w + x * a, rtol=1e-5, atol=1e-5)


def test_a_gemm_epilogue_stays_after_its_gemm(jit_backend: str) -> None:
    x, w, y, v = (RNG.standard_normal((64, 64)).astype(np.float32) for _ in range(4))
    b = RNG.standard_normal(64).astype(np.float32)

    def f(x, w, b, y, v):
        e = (x @ w + b).relu()   # the epilogue of the first gemm
        return e, (y @ v) * 2.0  # same shape, but it must wait for the second gemm
    args = [Tensor(a) for a in (x, w, b, y, v)]
    kernels = _kernels(f, *args)
    assert [len(k.outputs) for k in kernels] == [1, 1]
    if jit_backend == "llvm":
        text = fgrad.jit(f).lower(*args).as_text()
        assert "# gemm epilogues" in text
    e, s = fgrad.jit(f)(*args)
    xd = x.astype(np.float64)
    np.testing.assert_allclose(e.numpy(), np.maximum(xd @ w + b, 0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(s.numpy(), (y.astype(np.float64) @ v) * 2, rtol=1e-4,
                               atol=1e-4)


def test_merged_kernels_keep_to_the_buffer_limit(jit_backend: str) -> None:
    from fgrad.lower.schedule.partition import MAX_KERNEL_BUFFERS
    params, grads, tparams, tgrads, state, update = _adam_problem([(3,)] * 40)
    jaxpr = open_jaxpr(fgrad.make_jaxpr(update)(tparams, state, tgrads))[0]
    sched = schedule(jaxpr)
    kernels = [s for s in sched.steps if isinstance(s, KernelStep) and s.shape == (3,)]
    assert 1 < len(kernels) < 40
    realized = sched.realized
    for k in kernels:
        own = {id(v) for v in k.outputs}
        reads = {id(a) for e in fused_eqns(sched, k) for a in e.inputs
                 if id(a) in realized and id(a) not in own}
        assert len(own | reads) <= MAX_KERNEL_BUFFERS
    new_params, _ = fgrad.jit(update)(tparams, state, tgrads)
    for got, p, g in zip(new_params, params, grads, strict=True):
        want, _, _ = _numpy_adam(p.astype(np.float64), g.astype(np.float64), 0.0, 0.0, 1)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


def _step_names(fn, *arrays) -> list[str]:
    """The kinds of the schedule's steps in order: 'g' a gemm, 'k' a kernel."""
    jaxpr = open_jaxpr(fgrad.make_jaxpr(fn)(*arrays))[0]
    return [s.name[0] for s in schedule(jaxpr).steps]


def test_adam_on_weight_gradients_moves_next_to_their_gemms(jit_backend: str) -> None:
    """Each update reads its gradient d.T @ x and the step count's scalar kernel, which
    program order places after the gemms: the scalar kernel moves ahead of the first gemm
    and each update right after its gemm (on llvm, the gemm's epilogue)."""
    x = RNG.standard_normal((32, 24)).astype(np.float32)
    ds = [RNG.standard_normal((32, n)).astype(np.float32) for n in (16, 12)]
    ws = [RNG.standard_normal((n, 24)).astype(np.float32) for n in (16, 12)]
    opt = optim.Adam(lr=1e-2)

    def step(ws, state, ds, x):
        grads = [d.T @ x for d in ds]
        updates, state = opt.update(grads, state, ws)
        return optim.apply_updates(ws, updates), state
    tws, tds = [Tensor(w) for w in ws], [Tensor(d) for d in ds]
    args = (tws, opt.init(tws), tds, Tensor(x))
    jaxpr = open_jaxpr(fgrad.make_jaxpr(step)(*args))[0]
    steps = schedule(jaxpr).steps
    gemms = [i for i, s in enumerate(steps) if s.name.startswith("g")]
    assert len(gemms) == 2
    for at, w in zip(gemms, ws, strict=True):
        update = steps[at + 1]
        assert isinstance(update, KernelStep) and update.shape == w.shape
    assert all(isinstance(s, KernelStep) and s.shape == () for s in steps[:gemms[0]])
    if jit_backend == "llvm":
        text = fgrad.jit(step).lower(*args).as_text()
        for at in gemms:
            assert f"{steps[at].name} + {steps[at + 1].name}: one native call" in text
    state, want = args[1], [w.astype(np.float64) for w in ws]
    m = [np.zeros_like(w) for w in want]
    v = [np.zeros_like(w) for w in want]
    for t in (1, 2):
        tws, state = fgrad.jit(step)(tws, state, tds, Tensor(x))
        for i, d in enumerate(ds):
            grad = d.astype(np.float64).T @ x
            want[i], m[i], v[i] = _numpy_adam(want[i], grad, m[i], v[i], t)
    for got, expected in zip(tws, want, strict=True):
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-4, atol=1e-5)


def test_no_move_when_a_needed_step_reads_what_the_steps_after_the_gemm_write(
        jit_backend: str) -> None:
    """The reader of the first product also needs the second product's sum, which cannot
    run before the first gemm: the steps keep their order, and the results match NumPy."""
    a, b, c, e = (RNG.standard_normal((24, 24)).astype(np.float32) for _ in range(4))

    def f(a, b, c, e):
        p = a @ b
        q = c @ e
        return p * q.sum() + 1.0
    args = [Tensor(v) for v in (a, b, c, e)]
    assert _step_names(f, *args) == ["g", "g", "k", "k"]
    got = fgrad.jit(f)(*args).numpy()
    q = c.astype(np.float64) @ e
    np.testing.assert_allclose(got, (a.astype(np.float64) @ b) * q.sum() + 1.0, rtol=1e-4,
                               atol=1e-2)


def test_a_reader_moves_past_unrelated_steps_only_with_its_inputs_ready(
        jit_backend: str) -> None:
    """A second gemm sits between a product and its reader; the reader also needs a kernel
    computed from the program's inputs after that gemm: the kernel moves ahead, the reader
    follows its gemm, and the other gemm's result is unchanged."""
    a, b, c, e = (RNG.standard_normal((20, 20)).astype(np.float32) for _ in range(4))
    s = RNG.standard_normal(()).astype(np.float32)

    def f(a, b, c, e, s):
        p = a @ b
        q = c @ e
        scale = (s * 2.0).exp()
        return p * scale + 1.0, q
    args = [Tensor(v) for v in (a, b, c, e, s)]
    jaxpr = open_jaxpr(fgrad.make_jaxpr(f)(*args))[0]
    steps = schedule(jaxpr).steps
    first = next(i for i, st in enumerate(steps) if st.name.startswith("g"))
    assert isinstance(steps[first + 1], KernelStep) and steps[first + 1].shape == (20, 20)
    out, q = fgrad.jit(f)(*args)
    ad = a.astype(np.float64)
    np.testing.assert_allclose(out.numpy(), (ad @ b) * np.exp(2.0 * s) + 1.0, rtol=1e-4,
                               atol=1e-3)
    np.testing.assert_allclose(q.numpy(), c.astype(np.float64) @ e, rtol=1e-4, atol=1e-4)
