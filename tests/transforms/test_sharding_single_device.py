"""JAX's sharding API on fgrad's one device: meshes, PartitionSpecs, NamedSharding,
device_put / reshard / with_sharding_constraint, jit(in_shardings=...), shard_map with
collectives, and the errors. The training step of JAX's spmd_mnist_classifier_fromscratch
example (imports changed, small sizes, random data) is checked against plain NumPy SGD."""
from __future__ import annotations

import numpy as np
import numpy.random as npr
import pytest

import fgrad

# ------------------------------------------------- the example's code, only imports changed
from fgrad import NamedSharding
import fgrad as jax
from fgrad import jit, grad
from fgrad.sharding import PartitionSpec as P, AxisType, reshard
from fgrad.scipy.special import logsumexp
import fgrad.numpy as jnp

step_size = 0.05


def init_random_params(scale, layer_sizes, rng=npr.RandomState(0)):
    return [(scale * rng.randn(m, n), scale * rng.randn(n))
            for m, n in zip(layer_sizes[:-1], layer_sizes[1:])]


def predict(params, inputs):
    activations = inputs
    for w, b in params[:-1]:
        outputs = jnp.dot(activations, w) + b
        activations = jnp.tanh(outputs)
    final_w, final_b = params[-1]
    logits = jnp.dot(activations, final_w) + final_b
    return logits - logsumexp(logits, axis=1, keepdims=True)


def loss(params, batch):
    inputs, targets = batch
    preds = predict(params, inputs)
    return -jnp.mean(jnp.sum(preds * targets, axis=1))


@jax.jit(donate_argnums=0)
def train_step(params, batch):
    grads = grad(loss)(params, batch)
    return [(w - step_size * dw, b - step_size * db)
            for (w, b), (dw, db) in zip(params, grads)]


@jit
def accuracy(params, batch):
    inputs, targets = batch
    target_class = jnp.argmax(targets, axis=1)
    predicted_class = jnp.argmax(predict(params, inputs), axis=1)
    return jnp.mean(predicted_class == target_class)
# ------------------------------------------------------------------------------------------


def _np_loss_and_grads(params, x, y):
    """Plain NumPy forward pass and backpropagation of the example's loss."""
    acts = [x]
    for w, b in params[:-1]:
        acts.append(np.tanh(acts[-1] @ w + b))
    z = acts[-1] @ params[-1][0] + params[-1][1]
    zmax = z.max(axis=1, keepdims=True)
    lse = zmax + np.log(np.exp(z - zmax).sum(axis=1, keepdims=True))
    preds = z - lse
    value = -np.mean(np.sum(preds * y, axis=1))
    dpreds = -y / x.shape[0]
    dz = dpreds - np.exp(preds) * dpreds.sum(axis=1, keepdims=True)
    grads = []
    for i in range(len(params) - 1, -1, -1):
        w = params[i][0]
        grads.append((acts[i].T @ dz, dz.sum(axis=0)))
        if i:
            dz = (dz @ w.T) * (1 - acts[i] ** 2)
    return value, grads[::-1]


def test_spmd_mnist_training_step_matches_numpy_sgd():
    layer_sizes, batch_size, num_train = [20, 16, 12, 4], 8, 32
    rng = npr.RandomState(1)
    train_images = rng.rand(num_train, layer_sizes[0])
    train_labels = np.eye(layer_sizes[-1])[rng.randint(0, layer_sizes[-1], num_train)]

    num_devices = jax.device_count()
    assert num_devices == 1
    mesh = jax.make_mesh((jax.device_count(),), ("batch",), axis_types=(AxisType.Explicit,))
    replicated_sharding = NamedSharding(mesh, P())
    data_sharding = NamedSharding(mesh, P("batch"))

    params = init_random_params(0.3, layer_sizes)
    reference = [(w.copy(), b.copy()) for w, b in params]
    replicated_params = jax.device_put(params, replicated_sharding)
    perm = npr.RandomState(0).permutation(num_train)
    for i in range(num_train // batch_size):
        idx = perm[i * batch_size:(i + 1) * batch_size]
        images = jax.device_put(train_images[idx], data_sharding)
        labels = jax.device_put(train_labels[idx], data_sharding)
        assert images.sharding.device_set == {mesh.device}
        with jax.set_mesh(mesh):
            replicated_params = train_step(replicated_params, (images, labels))
        _, grads = _np_loss_and_grads(reference, train_images[idx], train_labels[idx])
        reference = [(w - step_size * dw, b - step_size * db)
                     for (w, b), (dw, db) in zip(reference, grads)]

    for (w, b), (rw, rb) in zip(replicated_params, reference):
        np.testing.assert_allclose(w.numpy(), rw, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(b.numpy(), rb, rtol=1e-10, atol=1e-12)
    sharded_images = reshard(train_images, data_sharding)
    sharded_labels = reshard(train_labels, data_sharding)
    got_loss = float(loss(replicated_params, (sharded_images, sharded_labels)))
    want_loss, _ = _np_loss_and_grads(reference, train_images, train_labels)
    assert abs(got_loss - want_loss) < 1e-10
    acc = float(accuracy(replicated_params, (sharded_images, sharded_labels)))
    logits = train_images
    for w, b in reference[:-1]:
        logits = np.tanh(logits @ w + b)
    logits = logits @ reference[-1][0] + reference[-1][1]
    assert acc == np.mean(logits.argmax(1) == train_labels.argmax(1))


def test_partition_spec_mesh_and_sharding_objects():
    assert P() == () and P("batch") == ("batch",) and P(None, "x")[1] == "x"
    assert P(("a", "b")).axis_names() == ["a", "b"]
    assert repr(P(None, "x")) == "PartitionSpec(None, 'x')"
    mesh = fgrad.make_mesh((1, 1), ("data", "model"))
    assert mesh.shape == {"data": 1, "model": 1} and mesh.size == 1
    assert mesh.axis_types == (AxisType.Auto, AxisType.Auto)
    assert fgrad.sharding.Mesh(np.array(["CPU"]), ("x",)).device == "CPU"
    s = NamedSharding(mesh, P(("data", "model")))
    assert s.is_fully_replicated and s.num_devices == 1 and s.shard_shape((6, 2)) == (6, 2)
    assert s == NamedSharding(mesh, P(("data", "model"))) and s != NamedSharding(mesh, P())
    x = fgrad.Tensor(np.ones(3, np.float32))
    assert x.sharding == fgrad.sharding.SingleDeviceSharding("CPU")
    with pytest.raises(TypeError, match="PartitionSpec"):
        P(3)


def test_set_mesh_use_mesh_and_bare_specs():
    mesh = fgrad.make_mesh((1,), ("i",))
    assert fgrad.sharding.get_mesh() is None
    with fgrad.set_mesh(mesh):
        assert fgrad.sharding.get_mesh() is mesh
        x = fgrad.device_put(np.arange(4.0), P("i"))
        np.testing.assert_array_equal(x.numpy(), np.arange(4.0))
    with fgrad.sharding.use_mesh(mesh):
        assert fgrad.sharding.get_mesh() is mesh
    assert fgrad.sharding.get_mesh() is None
    with pytest.raises(ValueError, match="needs a current mesh"):
        fgrad.device_put(np.ones(2), P("i"))


def test_with_sharding_constraint_is_identity_under_transforms():
    mesh = fgrad.make_mesh((1,), ("b",))
    s = NamedSharding(mesh, P("b"))

    def f(x):
        y = fgrad.lax.with_sharding_constraint(x * x, s)
        return fgrad.lax.with_sharding_constraint({"y": y}, {"y": s})["y"].sum()

    x = np.arange(1.0, 5.0, dtype=np.float32)
    np.testing.assert_allclose(fgrad.jit(fgrad.grad(f))(x).numpy(), 2 * x)
    out = fgrad.vmap(lambda v: fgrad.lax.with_sharding_constraint(v + 1, s))(x.reshape(2, 2))
    np.testing.assert_array_equal(out.numpy(), x.reshape(2, 2) + 1)
    with pytest.raises(ValueError, match="2 entries but the array has only 1"):
        fgrad.lax.with_sharding_constraint(x, NamedSharding(mesh, P("b", None)))


def test_jit_accepts_and_validates_shardings():
    mesh = fgrad.make_mesh((1,), ("batch",))
    f = fgrad.jit(lambda a, b: a @ b, in_shardings=(NamedSharding(mesh, P("batch")),
                                                    NamedSharding(mesh, P())),
                  out_shardings=NamedSharding(mesh, P("batch")))
    a, b = np.ones((4, 3), np.float32), np.full((3, 2), 2.0, np.float32)
    np.testing.assert_allclose(f(a, b).numpy(), a @ b)
    with fgrad.set_mesh(mesh):
        with pytest.raises(ValueError, match="jit in_shardings.*'model'"):
            fgrad.jit(lambda x: x, in_shardings=P("model"))
        with pytest.raises(TypeError, match="jit out_shardings"):
            fgrad.jit(lambda x: x, out_shardings="batch")


def test_shard_map_collectives_on_size_one_axes():
    mesh = fgrad.make_mesh((1, 1), ("x", "y"))
    lax = fgrad.lax

    def body(a, b):
        total = lax.psum(a.sum(), "x")
        mean = lax.pmean(b, "y")
        idx = lax.axis_index("x") + 10 * lax.axis_index("y")
        gathered = lax.all_gather(a, "y")
        return a / total + idx, mean, gathered

    f = fgrad.shard_map(body, mesh=mesh, in_specs=(P("x", "y"), P()),
                        out_specs=(P("x", "y"), P(), P()))
    a = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)
    b = np.float32(3.5)
    for g in (f, fgrad.jit(f)):
        out, mean, gathered = g(a, b)
        np.testing.assert_allclose(out.numpy(), a / a.sum(), rtol=1e-6)
        assert float(mean) == 3.5
        np.testing.assert_array_equal(gathered.numpy(), a[None])
    dx = fgrad.grad(lambda v: f(v, b)[0].sum())(a)
    np.testing.assert_allclose(dx.numpy(), 1 / a.sum() - a.sum() / a.sum() ** 2, atol=1e-7)

    @fgrad.shard_map(in_specs=P("x"), out_specs=P(), check_vma=False)
    def under_set_mesh(v):
        return lax.psum(v, ("x"))
    with fgrad.set_mesh(mesh):
        np.testing.assert_array_equal(under_set_mesh(a).numpy(), a)


def test_errors_name_the_counts_and_the_axes():
    with pytest.raises(ValueError, match="asks for 8 devices.*1 device"):
        fgrad.make_mesh((2, 4), ("a", "b"))
    with pytest.raises(ValueError, match="holds 2 devices"):
        fgrad.sharding.Mesh(np.array(["CPU", "CPU"]), ("x",))
    with pytest.raises(ValueError, match="one name per axis"):
        fgrad.make_mesh((1,), ("a", "b"))
    mesh = fgrad.make_mesh((1,), ("batch",))
    with pytest.raises(ValueError, match=r"\['model'\].*\('batch',\)"):
        NamedSharding(mesh, P("model"))
    with pytest.raises(ValueError, match="more than once"):
        NamedSharding(mesh, P("batch", "batch"))
    with pytest.raises(TypeError, match="PartitionSpec"):
        NamedSharding(mesh, ("batch",))
    f = fgrad.shard_map(lambda v: v, mesh=mesh, in_specs=(P("model"),), out_specs=P())
    with pytest.raises(ValueError, match="in_specs.*'model'"):
        f(np.ones(2))
    fgrad.set_mesh(mesh)  # set now, as JAX's set_mesh does outside a with block
    try:
        with pytest.raises(ValueError, match="reshard.*'model'"):
            reshard(np.ones(2), P("model"))
    finally:
        fgrad.set_mesh(None)
    with pytest.raises(ValueError, match="no mesh"):
        fgrad.shard_map(lambda v: v, in_specs=P(), out_specs=P())(np.ones(2))
    with pytest.raises(NameError, match="'batch'"):
        fgrad.lax.psum(np.ones(2), "batch")
