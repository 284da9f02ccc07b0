"""A user's type checker sees fgrad: `jit(f)` keeps f's parameters and return type, grad and
vmap keep the parameters, and a planted mistake in a user script is reported.

mypy runs on a script in a temporary folder, so it finds fgrad the way a user's checker
does: through the installed package (the README's editable install must be visible to it).
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

USER_SCRIPT = '''
import fgrad
from fgrad import Tensor


def loss(w: Tensor, x: Tensor) -> Tensor:
    return (w * x).sum()


step = fgrad.jit(loss)
ok: Tensor = step(Tensor([1.0]), Tensor([2.0]))
value, g = fgrad.value_and_grad(loss)(Tensor([1.0]), Tensor([2.0]))
reveal_type(value)
batched: Tensor = fgrad.vmap(loss)(Tensor([[1.0]]), Tensor([[2.0]]))
gradient = fgrad.grad(loss)(Tensor([1.0]), Tensor([2.0]))

@fgrad.jit
def scaled(x: Tensor, factor: float) -> Tensor:
    return x * factor


also_ok: Tensor = scaled(Tensor([1.0]), 2.0)
wrong_argument = step("not a tensor", Tensor([1.0]))  # PLANTED 1
wrong_result: int = scaled(Tensor([1.0]), 2.0)  # PLANTED 2
missing_argument = fgrad.grad(loss)(Tensor([1.0]))  # PLANTED 3
'''


def _line_of(marker: str) -> int:
    lines = textwrap.dedent(USER_SCRIPT).splitlines()
    return next(i for i, text in enumerate(lines, start=1) if marker in text)


def test_a_users_checker_catches_planted_type_errors(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("mypy", reason="mypy comes with the test extra: pip install -e .[test]")
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent(USER_SCRIPT))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", os.devnull,
         "--config-file", os.devnull, "--python-executable", sys.executable, script.name],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    report = result.stdout + result.stderr
    assert "Cannot find implementation or library stub" not in report, report
    errors = {int(line.split(":")[1]) for line in report.splitlines() if ": error:" in line}
    planted = {_line_of(f"PLANTED {n}") for n in (1, 2, 3)}
    assert errors == planted, report
    revealed = _line_of("reveal_type(value)")
    assert f"user_script.py:{revealed}: note: Revealed type is \"fgrad.core.tensor.Tensor\"" \
        in report, report
