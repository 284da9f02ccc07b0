"""fgrad.distributed in a job of one process (no mpiexec): API, errors, checkpoints.

The values across several processes are checked in test_mpi.py.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any

import numpy as np
import pytest

import fgrad
from fgrad import Tensor, distributed as dist


def test_alone_a_job_of_one() -> None:
    dist.initialize()
    dist.initialize()  # idempotent
    assert fgrad.process_count() == dist.process_count() == 1
    assert fgrad.process_index() == dist.process_index() == 0


def test_collectives_keep_the_tree_and_are_identities_alone() -> None:
    tree = {"w": Tensor(np.arange(6, dtype=np.float32).reshape(2, 3)), "n": [Tensor([1, 2])]}
    for fn in (dist.psum, dist.pmax, dist.pmin, dist.broadcast):
        out = fn(tree)
        np.testing.assert_array_equal(out["w"].numpy(), tree["w"].numpy())
        np.testing.assert_array_equal(out["n"][0].numpy(), [1, 2])
    assert dist.all_gather(tree)["w"].shape == (1, 2, 3)
    assert dist.all_gather(tree, tiled=True)["n"][0].shape == (2,)
    assert dist.pmean(np.float32(2.5)).numpy() == 2.5  # NumPy leaves become Tensors


def test_errors_name_the_op_and_the_fix() -> None:
    with pytest.raises(TypeError, match="pmean requires a floating-point operand"):
        dist.pmean(Tensor([1, 2]))
    with pytest.raises(TypeError, match="psum requires a numeric operand, got bool"):
        dist.psum(Tensor([True]))
    with pytest.raises(ValueError, match="root=1 is not a process of this job"):
        dist.broadcast(Tensor([1.0]), root=1)
    with pytest.raises(ValueError, match="tiled=True.*scalar"):
        dist.all_gather(Tensor(1.0), tiled=True)
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        dist.shard_batch(np.zeros((4, 2)), axis=2)


def test_shard_batch_alone_is_the_whole_batch() -> None:
    x, y = dist.shard_batch((np.arange(12).reshape(6, 2), Tensor(np.arange(6))))
    np.testing.assert_array_equal(x, np.arange(12).reshape(6, 2))
    np.testing.assert_array_equal(y.numpy(), np.arange(6))


def test_checkpoint_round_trip_leaves_no_temporary_file(tmp_path: Any) -> None:
    tree = {"a": Tensor(np.random.default_rng(0).normal(size=(3, 2)).astype(np.float32)),
            "b": (Tensor(np.arange(4, dtype=np.int32)),)}
    path = os.path.join(tmp_path, "sub", "ckpt.npz")
    dist.save_checkpoint(path, tree)
    assert os.listdir(os.path.dirname(path)) == ["ckpt.npz"]
    back = dist.load_checkpoint(path, tree)
    np.testing.assert_array_equal(back["a"].numpy(), tree["a"].numpy())
    np.testing.assert_array_equal(back["b"][0].numpy(), np.arange(4))
    assert back["b"][0].dtype == fgrad.dtypes.int32
    with pytest.raises(ValueError, match=r"has shape \(3, 2\).*\(2, 3\) is expected"):
        dist.load_checkpoint(path, {"a": Tensor(np.zeros((2, 3), np.float32)),
                                    "b": tree["b"]})


def test_a_failure_report_waits_until_the_launcher_has_read_it(tmp_path: Any) -> None:
    """Before MPI_Abort, the report in stderr's pipe must have been read by the launcher."""
    from fgrad.distributed.runtime import _wait_until_read

    read_fd, write_fd = os.pipe()
    with os.fdopen(write_fd, "w") as writer, os.fdopen(read_fd, "rb") as reader:
        writer.write("report\n")
        writer.flush()
        got: list[bytes] = []
        late_reader = threading.Timer(0.3, lambda: got.append(reader.read1(64)))
        start = time.perf_counter()
        late_reader.start()
        _wait_until_read(writer)
        late_reader.join()
        assert got == [b"report\n"] and time.perf_counter() - start >= 0.3
        unread_start = time.perf_counter()
        writer.write("never read\n")
        writer.flush()
        _wait_until_read(writer, limit_s=0.2)  # a launcher that never reads: bounded wait
        assert time.perf_counter() - unread_start < 1.5
    with open(tmp_path / "log", "w") as file:
        start = time.perf_counter()
        _wait_until_read(file)  # a file, not a pipe: nothing to wait for
        assert time.perf_counter() - start < 0.5
