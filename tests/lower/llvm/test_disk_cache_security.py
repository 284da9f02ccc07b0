"""The compile cache never runs an entry under another program's name, and is not used from
a directory that others may write (issue 18, item 3)."""
import os
import shutil

import numpy as np
import pytest

from fgrad.lower.llvm import disk_cache
from subprocess_probe import run_probe


def test_entry_names_its_key():
    entry = disk_cache.encode(b"object code", "a" * 64)
    assert disk_cache.decode(entry, "a" * 64) == b"object code"
    assert disk_cache.decode(entry, "b" * 64) is None


def test_entry_copied_over_another_key_is_a_miss_and_deleted(tmp_path, monkeypatch):
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(tmp_path))
    disk_cache.store("first", b"payload of first")
    folder = tmp_path / "llvm"
    shutil.copy(folder / "first.fgo", folder / "second.fgo")
    assert disk_cache.load("second") is None
    assert not (folder / "second.fgo").exists()
    assert disk_cache.load("first") == b"payload of first"


@pytest.mark.parametrize("mode", [0o777, 0o770])
def test_a_directory_others_may_write_is_not_used(tmp_path, monkeypatch, mode):
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(disk_cache, "_warned", set())
    disk_cache.store("k", b"code")
    assert (os.stat(tmp_path / "llvm").st_mode & 0o777) == 0o700
    os.chmod(tmp_path / "llvm", mode)
    with pytest.warns(RuntimeWarning, match="not using the compile cache"):
        assert disk_cache.load("k") is None
    os.chmod(tmp_path / "llvm", 0o700)
    assert disk_cache.load("k") == b"code"


PROGRAM = """
    import numpy as np, fgrad
    x = np.linspace(-2, 2, 64, dtype=np.float32)
    f = fgrad.jit(lambda a: a * {scale} + 1.0, backend="llvm")
    print(bool(np.allclose(f(fgrad.Tensor(x)).numpy(), x * {scale} + 1.0)))
"""


def test_swapped_entry_is_rebuilt_not_run(tmp_path):
    """Compile two programs, copy the first one's entry over the second one's name, and
    run the second in a fresh process: it must rebuild and give its own answer."""
    env = {"FGRAD_CACHE_DIR": str(tmp_path)}
    folder = tmp_path / "llvm"
    assert run_probe(PROGRAM.format(scale=2.0), env=env).split() == ["True"]
    first = set(os.listdir(folder))
    assert run_probe(PROGRAM.format(scale=-3.0), env=env).split() == ["True"]
    (second,) = set(os.listdir(folder)) - first
    (one,) = first
    shutil.copy(folder / one, folder / second)
    assert run_probe(PROGRAM.format(scale=-3.0), env=env).split() == ["True"]
    assert disk_cache.decode((folder / second).read_bytes(), second[:-4]) is not None
    np.testing.assert_equal(len(os.listdir(folder)), 2)
