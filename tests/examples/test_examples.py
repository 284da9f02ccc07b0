"""Every example runs in smoke mode (a few steps) as a user would start it."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = ["train_digits.py", "train_digits_dp.py", "infer_digits.py", "per_example_grads.py",
            "char_lm.py", "custom_rules.py"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs_in_smoke_mode(name: str, tmp_path: object) -> None:
    pytest.importorskip("sklearn") if "digits" in name else None
    args = [sys.executable, os.path.join(ROOT, "examples", name), "--smoke"]
    if name.startswith("train_digits"):  # the data-parallel one runs here as 1 process
        args += ["--out", str(tmp_path)]
    env = dict(os.environ, MPLBACKEND="Agg")
    result = subprocess.run(args, cwd=os.path.join(ROOT, "examples"), env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    if name == "train_digits.py":
        assert os.path.exists(os.path.join(str(tmp_path), "digits_cnn.safetensors"))
        assert os.path.exists(os.path.join(str(tmp_path), "loss.png"))
        assert "test accuracy" in result.stdout
