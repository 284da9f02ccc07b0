"""fgrad.optim under Optax's names against Optax itself: `import fgrad.optim as optax` runs an
Optax program with Optax's numbers.

The fixture (fixtures/gen_optax_compat.py, run once with optax and jax installed) holds each
case as a JSON spec that `build` turns into an object of either library, with Optax's
parameter trajectories, schedule values, losses and loss gradients. Trajectories are compared
eagerly and under `fgrad.jit`. Tolerances: fgrad forms Adam's bias correction `1 - b**t`
without rounding `b**t` to float32 first (see `fgrad.optim.transforms_more`); Optax's is off
by up to ~1e-5 relative in early steps, which moves parameters by up to ~lr * 1e-5 per step,
hence the absolute 2e-6 on parameters of size ~1.
"""
import json
import pathlib
from typing import Any

import numpy as np
import pytest
from optax_specs import build

import fgrad
from fgrad import Tensor
from fgrad import optim as optax  # the point of the module: Optax's names

pytestmark = pytest.mark.backends  # jit tests run per backend (conftest.py)

FIXTURES = np.load(pathlib.Path(__file__).parent / "fixtures" / "optax_compat.npz")
SPECS = json.loads(str(FIXTURES["specs"]))
NAMES = ("w", "b", "s")
RTOL, ATOL = 2e-6, 2e-6


def run_optimizer(name: str, staged: bool) -> list[dict[str, np.ndarray]]:
    """Params (NumPy) after each step of case `name`, on the fixture's gradients."""
    spec = SPECS["optimizers"][name]
    source = "grads_nan" if spec.get("grads") == "nan" else "grads"
    opt = build(optax, spec)
    params = {k: Tensor(FIXTURES[f"params0/{k}"]) for k in NAMES}
    state = opt.init(params)

    def step(params: Any, state: Any, grads: Any) -> Any:
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state
    if staged:
        step = fgrad.jit(step)
    out = []
    for i in range(SPECS["steps"]):
        grads = {k: Tensor(FIXTURES[f"{source}/{k}"][i]) for k in NAMES}
        params, state = step(params, state, grads)
        out.append({k: v.numpy() for k, v in params.items()})
    return out


def check_trajectory(name: str, traj: list[dict[str, np.ndarray]]) -> None:
    for i, params in enumerate(traj):
        for k in NAMES:
            np.testing.assert_allclose(params[k], FIXTURES[f"traj/{name}/{k}"][i], rtol=RTOL,
                                       atol=ATOL, err_msg=f"{name} step {i} param {k}")


@pytest.mark.parametrize("name", sorted(SPECS["optimizers"]))
def test_optimizer_matches_optax_eagerly(name: str) -> None:
    check_trajectory(name, run_optimizer(name, staged=False))


@pytest.mark.parametrize("name", sorted(SPECS["optimizers"]))
def test_optimizer_matches_optax_under_jit(name: str) -> None:
    check_trajectory(name, run_optimizer(name, staged=True))  # fgrad.jit, per backend


@pytest.mark.parametrize("name", sorted(SPECS["schedules"]))
def test_schedule_matches_optax(name: str) -> None:
    schedule = build(optax, SPECS["schedules"][name])
    got = [np.float32(schedule(Tensor(c, dtype=fgrad.dtypes.int32)).item())
           for c in range(SPECS["counts"])]
    np.testing.assert_allclose(got, FIXTURES[f"sched/{name}"], rtol=2e-6, atol=1e-7,
                               err_msg=name)


def call_loss(spec: Any, inputs: dict[str, Any], first: Any = None) -> Any:
    args = [inputs[n] for n in spec["inputs"]]
    if first is not None:
        args[0] = first
    kw = {k: inputs[n] for k, n in spec.get("kw_inputs", {}).items()}
    return getattr(optax.losses, spec["fn"])(*args, *spec["args"], **spec["kwargs"], **kw)


@pytest.mark.parametrize("name", sorted(SPECS["losses"]))
def test_loss_and_its_gradient_match_optax(name: str) -> None:
    spec = SPECS["losses"][name]
    inputs = {k[len("loss_in/"):]: Tensor(FIXTURES[k]) for k in FIXTURES.files
              if k.startswith("loss_in/")}
    np.testing.assert_allclose(call_loss(spec, inputs).numpy(), FIXTURES[f"loss/{name}"],
                               rtol=2e-6, atol=1e-6, err_msg=name)
    grad = fgrad.grad(lambda x: call_loss(spec, inputs, x).sum())(inputs[spec["inputs"][0]])
    np.testing.assert_allclose(grad.numpy(), FIXTURES[f"loss_grad/{name}"], rtol=2e-5,
                               atol=1e-6, err_msg=name)


def test_losses_match_optax_under_jit() -> None:
    inputs = {k[len("loss_in/"):]: Tensor(FIXTURES[k]) for k in FIXTURES.files
              if k.startswith("loss_in/")}
    everything = fgrad.jit(lambda inputs: {name: call_loss(spec, inputs)
                                           for name, spec in SPECS["losses"].items()})
    for name, got in everything(inputs).items():
        np.testing.assert_allclose(got.numpy(), FIXTURES[f"loss/{name}"], rtol=2e-6,
                                   atol=1e-6, err_msg=name)


def test_top_level_losses_are_the_module_s() -> None:
    assert optax.softmax_cross_entropy is optax.losses.softmax_cross_entropy
    assert optax.l2_loss is optax.losses.l2_loss


def test_optax_style_training_loop_with_clipping_and_adamw() -> None:
    """An Optax program, only the imports changed (`jax` -> `fgrad`, optax -> fgrad.optim)."""
    jax, jnp = fgrad, fgrad.numpy
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(64, 3)).astype(np.float32))
    y = x @ jnp.asarray([1.0, -2.0, 0.5]) + 0.3
    params = {"w": jnp.zeros(3), "b": jnp.zeros(())}
    schedule = optax.warmup_cosine_decay_schedule(0.0, 0.1, 10, 200)
    optimizer = optax.chain(optax.clip_by_global_norm(1.0),
                            optax.adamw(learning_rate=schedule, weight_decay=1e-4))
    opt_state = optimizer.init(params)

    def loss_fn(params: Any) -> Any:
        return optax.l2_loss(x @ params["w"] + params["b"], y).mean()

    @jax.jit
    def step(params: Any, opt_state: Any) -> Any:
        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    first = float(loss_fn(params))
    for _ in range(200):
        params, opt_state, loss = step(params, opt_state)
    assert float(loss) < 1e-3 * first
    np.testing.assert_allclose(params["w"].numpy(), [1.0, -2.0, 0.5], atol=2e-2)


def test_multisteps_and_inject_hyperparams_have_optax_s_interface() -> None:
    params = {"w": Tensor(np.ones(3, np.float32))}
    grads = {"w": Tensor(np.full(3, 0.5, np.float32))}
    multi = optax.MultiSteps(optax.sgd(0.1), every_k_schedule=2)
    tx = multi.gradient_transformation()
    state = tx.init(params)
    updated = []
    for _ in range(4):
        _, state = tx.update(grads, state, params)
        updated.append(bool(multi.has_updated(state).item()))
    assert updated == [False, True, False, True]
    opt = optax.inject_hyperparams(optax.adam)(learning_rate=optax.linear_schedule(0.1, 0.0, 4))
    state = opt.init(params)
    _, state = opt.update(grads, state, params)
    assert state.hyperparams["learning_rate"].item() == pytest.approx(0.1)
    assert state.hyperparams["b1"].item() == pytest.approx(0.9)
    _, state = opt.update(grads, state, params)
    assert state.hyperparams["learning_rate"].item() == pytest.approx(0.075)


def test_incremental_and_periodic_update() -> None:
    new, old = {"a": Tensor([1.0, 2.0])}, {"a": Tensor([3.0, 6.0])}
    np.testing.assert_allclose(optax.incremental_update(new, old, 0.25)["a"].numpy(),
                               [2.5, 5.0])
    assert optax.periodic_update(new, old, 10, 5) is new
    assert optax.periodic_update(new, old, 11, 5) is old
    got = optax.periodic_update(new, old, Tensor(10, dtype=fgrad.dtypes.int32), 5)
    np.testing.assert_array_equal(got["a"].numpy(), [1.0, 2.0])
