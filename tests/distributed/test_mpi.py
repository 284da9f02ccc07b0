"""fgrad.distributed across real processes: `mpiexec -n 2` on this machine (loopback).

Each test starts mpi_worker.py under mpiexec; the workers write what they computed, and the
checks here compare it with NumPy references built from the workers' known inputs. Skipped,
with the reason, when mpi4py or a working `mpiexec` is missing (pip install
'fgrad[distributed]'); FGRAD_REQUIRE_MPI=1 (CI) turns that skip into a failure.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from typing import Any

import numpy as np
import pytest

from mpi_worker import TRAIN, inputs, train_data

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
N = 2


def find_mpiexec() -> str | None:
    """The mpiexec beside this Python (a virtualenv's MPICH from PyPI), else on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return beside if os.path.exists(beside) else shutil.which("mpiexec")


def launch(n: int, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """Run `mpiexec -n n python *args` with this checkout's fgrad, one thread per process."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, HERE]), FGRAD_NUM_THREADS="1",
               OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    cmd = [MPIEXEC or "mpiexec", "-n", str(n), sys.executable, *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _mpi_problem() -> str | None:
    if MPIEXEC is None:
        return "no mpiexec found (pip install 'fgrad[distributed]' brings MPICH's)"
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "mpi4py is not installed (pip install 'fgrad[distributed]')"
    probe = "from mpi4py import MPI; assert MPI.COMM_WORLD.Get_size() == 2"
    try:
        result = launch(N, "-c", probe, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"mpiexec -n 2 cannot start here: {err}"
    if result.returncode:
        return f"mpiexec -n 2 cannot start here: {result.stderr.strip()[-300:]}"
    return None


MPIEXEC = find_mpiexec()
PROBLEM = _mpi_problem()
if PROBLEM and os.environ.get("FGRAD_REQUIRE_MPI") == "1":
    raise RuntimeError(f"FGRAD_REQUIRE_MPI=1 but {PROBLEM}")
pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=str(PROBLEM))


def run_scenario(n: int, scenario: str, out: Any, *backends: str) -> list[dict]:
    """Each process's results of one worker scenario."""
    result = launch(n, os.path.join(HERE, "mpi_worker.py"), scenario, str(out), *backends)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return [dict(np.load(os.path.join(out, f"{scenario}-{r}.npz"))) for r in range(n)]


@pytest.fixture(scope="module")
def collectives(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    backends = ["numpy", "llvm"] + (["opencl"] if opencl_works() else [])
    return run_scenario(N, "collectives", tmp_path_factory.mktemp("mpi"), *backends)


def opencl_works() -> bool:
    try:
        from fgrad.lower.opencl import device
        device.default_index()
        return True
    except Exception:
        return False


def expected_collectives(rank: int) -> dict[str, np.ndarray]:
    """NumPy references for one process (the keys the worker writes after 'MODE/')."""
    xs = [inputs(r) for r in range(N)]
    a = np.stack([x["a"] for x in xs]).astype(np.float64)
    b = np.stack([x["b"] for x in xs])
    w = np.stack([x["w"] for x in xs]).astype(np.float64)
    ww = np.stack([x["ww"] for x in xs]).astype(np.float64)
    seqs = np.stack([x["xs"] for x in xs]).astype(np.float64)
    mine = a[rank] == a.max(0)
    return {
        "coll['psum']['a']": a.sum(0), "coll['psum']['b']": b.sum(0),
        "coll['pmean']": a.mean(0),
        "coll['pmax']['a']": a.max(0), "coll['pmax']['b']": b.max(0),
        "coll['pmin']['a']": a.min(0), "coll['pmin']['b']": b.min(0),
        "coll['gather']['a']": a, "coll['gather']['b']": b,
        "coll['tiled']['a']": a.reshape(-1, 3), "coll['tiled']['b']": b.reshape(-1),
        "coll['bcast']['a']": a[1], "coll['bcast']['b']": b[1],
        "grad['psum']": w.sum(0), "grad['pmean']": w.mean(0),
        "grad['pmax']": np.where(mine, w.sum(0), 0.0), "grad['gather']": ww.sum(0)[rank],
        "grad['bcast']": w.sum(0) if rank == 1 else np.zeros((2, 3)),
        "vmap['psum0']": seqs.sum(0), "vmap['psum1']": seqs.sum(0).T,
        "vmap['gather']": seqs.transpose(1, 0, 2),
        "scan['carry']": seqs.sum((0, 1)), "scan['ys']": 2 * seqs.sum(0),
    }


@pytest.mark.parametrize("rank", range(N))
def test_collective_values_eager_jit_grad_vmap_scan(collectives: list[dict], rank: int) -> None:
    got = collectives[rank]
    assert int(got["count"]) == N and int(got["index"]) == rank
    modes = sorted({k.split("/")[0] for k in got if "/" in k})
    assert modes == sorted(["eager", "numpy", "llvm"] + (["opencl"] if any(
        k.startswith("opencl/") for k in got) else []))
    for key, want in expected_collectives(rank).items():
        for mode in modes:
            np.testing.assert_allclose(got[f"{mode}/{key}"], want, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{mode}/{key} on process {rank}")
            if not key.endswith("['b']"):
                assert got[f"{mode}/{key}"].dtype == np.float32, f"{mode}/{key}"


@pytest.mark.parametrize("rank", range(N))
def test_vmapped_tiled_gather(collectives: list[dict], rank: int) -> None:
    """vmap over axis 1 of (5, 3): each of the 3 columns gathers (1, 5) blocks into (2, 5);
    the batch axis comes out first."""
    seqs = np.stack([inputs(r)["xs"] for r in range(N)])
    want = seqs.transpose(2, 0, 1)  # (column, process, row)
    modes = {k.split("/")[0] for k in collectives[rank] if "/" in k}
    for mode in modes:
        np.testing.assert_allclose(collectives[rank][f"{mode}/vmap['tiled']"], want,
                                   err_msg=mode)


def test_shard_batch_gives_each_process_its_block(collectives: list[dict]) -> None:
    for rank in range(N):
        np.testing.assert_array_equal(collectives[rank]["shard"],
                                      np.arange(8).reshape(4, 2)[2 * rank:2 * rank + 2])
        assert "2 processes cannot split equally" in str(collectives[rank]["shard_error"])


def test_checkpoint_written_by_process_0_loads_everywhere(collectives: list[dict]) -> None:
    for rank in range(N):
        np.testing.assert_array_equal(collectives[rank]["ckpt['a']"], inputs(0)["a"])
        np.testing.assert_array_equal(collectives[rank]["ckpt['b']"], inputs(0)["b"])


# ---------------------------------------------------------------------------- training

def numpy_training(init: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], list[float]]:
    """The worker's SGD on the whole batch, by hand in float64 (the independent reference)."""
    x, y = (a.astype(np.float64) if a.dtype.kind == "f" else a for a in train_data())
    p = {k: v.astype(np.float64) for k, v in init.items()}
    losses = []
    for _ in range(TRAIN["steps"]):
        h = np.tanh(x @ p["w0"] + p["b0"])
        z = h @ p["w1"] + p["b1"]
        z = z - z.max(1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(1, keepdims=True))
        losses.append(-logp[np.arange(len(y)), y].mean())
        dz = np.exp(logp)
        dz[np.arange(len(y)), y] -= 1
        dz /= len(y)
        dh = (dz @ p["w1"].T) * (1 - h ** 2)
        grads = {"w1": h.T @ dz, "b1": dz.sum(0), "w0": x.T @ dh, "b0": dh.sum(0)}
        p = {k: p[k] - TRAIN["lr"] * grads[k] for k in p}
    return p, losses


def _tree(res: dict, prefix: str) -> dict[str, np.ndarray]:
    return {k[len(prefix) + 2:-2]: v for k, v in res.items() if k.startswith(prefix + "[")}


@pytest.fixture(scope="module")
def training(tmp_path_factory: pytest.TempPathFactory) -> dict[int, list[dict]]:
    return {n: run_scenario(n, "train", tmp_path_factory.mktemp(f"train{n}"))
            for n in (1, N)}


def test_two_processes_train_like_one_on_the_whole_batch(training: dict) -> None:
    one, two = training[1][0], training[N]
    for key in one:
        diff = float(np.max(np.abs(two[0][key] - one[key])))
        print(f"max |2 processes - 1 process| {key}: {diff:.3g}")
        np.testing.assert_allclose(two[0][key], one[key], rtol=2e-5, atol=2e-6, err_msg=key)


def test_processes_hold_identical_parameters(training: dict) -> None:
    """Process 1 started from its own seed; after broadcast and every step it matches 0."""
    zero, first = training[N]
    assert zero.keys() == first.keys()
    for key in zero:
        np.testing.assert_array_equal(zero[key], first[key], err_msg=key)


def test_one_process_training_matches_numpy(training: dict) -> None:
    res = training[1][0]
    params, losses = numpy_training(_tree(res, "init"))
    np.testing.assert_allclose(res["losses"], losses, rtol=1e-4)
    for k, v in params.items():
        np.testing.assert_allclose(_tree(res, "final")[k], v, rtol=1e-4, atol=1e-5)
    assert losses[-1] < losses[0]


# ---------------------------------------------------------------------------- failure

def test_a_failing_process_ends_the_job_quickly(tmp_path: Any) -> None:
    start = time.perf_counter()
    result = launch(N, os.path.join(HERE, "mpi_worker.py"), "fail", str(tmp_path), timeout=60)
    elapsed = time.perf_counter() - start
    assert result.returncode != 0
    assert "process 1 of 2 failed with an unhandled RuntimeError" in result.stderr
    assert "deliberate failure in the test" in result.stderr
    assert elapsed < 20, f"the job took {elapsed:.1f} s to end"
    assert not os.path.exists(os.path.join(tmp_path, "fail-0.npz"))



# ---------------------------------------------------------------------------- example

def test_data_parallel_example_runs_on_two_processes(tmp_path: Any) -> None:
    pytest.importorskip("sklearn")
    script = os.path.join(ROOT, "examples", "train_digits_dp.py")
    result = launch(N, script, "--smoke", "--out", str(tmp_path), timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert result.stdout.count("test accuracy") == 1, result.stdout  # process 0 only
    assert "on 2 processes" in result.stdout
    for name in ("digits_cnn.safetensors", "loss.png", "digits_cnn_dp.npz"):
        assert os.path.exists(os.path.join(tmp_path, name)), name
