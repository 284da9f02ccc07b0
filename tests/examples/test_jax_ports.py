"""JAX programs ported by changing only their imports print JAX's numbers.

examples/jax_ports/<name>_fgrad.py must equal <name>_jax.py except for import lines mapped
jax -> fgrad; its output (smoke run) must match the JAX original's, recorded in
fixtures/<name>_jax.txt by fixtures/gen_jax_ports.py.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PORTS = os.path.join(ROOT, "examples", "jax_ports")
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
# name -> (rtol, atol) between the port's and JAX's printed numbers (both compute in float32;
# the GP fit's 200 gradient steps amplify rounding differences in the last printed digits)
NAMES = {"digits_mlp": (1e-4, 2e-4), "gp_regression": (2e-3, 2e-3),
         "autodiff_tour": (1e-5, 1e-6), "digits_stax": (1e-4, 2e-4)}


def _read(path: str) -> list[str]:
    with open(path) as f:
        return f.read().splitlines()


def _as_fgrad(line: str) -> str:
    return re.sub(r"\bjax\b", "fgrad", line)


@pytest.mark.parametrize("name", NAMES)
def test_only_imports_differ(name: str) -> None:
    original = _read(os.path.join(PORTS, f"{name}_jax.py"))
    port = _read(os.path.join(PORTS, f"{name}_fgrad.py"))
    assert len(original) == len(port)
    changed = [(a, b) for a, b in zip(original, port) if a != b]
    assert changed, "the port must change the jax imports"
    for a, b in changed:
        assert a.startswith(("import jax", "from jax")), f"non-import line changed: {a!r}"
        assert b == _as_fgrad(a), f"{a!r} should become {_as_fgrad(a)!r}, got {b!r}"
    assert not any("jax" in line for line in port if line.startswith(("import", "from")))


def _numbers(text: str) -> np.ndarray:
    rows = [re.sub(r" \([0-9.]+ s\)", "", line) for line in text.splitlines() if line.strip()]
    number = r"[-+]?\d+\.?\d*(?:e[-+]?\d+)?"
    return np.array([float(v) for row in rows for v in re.findall(number, row)])


@pytest.mark.parametrize("name", NAMES)
def test_port_prints_the_jax_numbers(name: str) -> None:
    if name.startswith("digits"):
        pytest.importorskip("sklearn")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, os.path.join(PORTS, f"{name}_fgrad.py"),
                             "--smoke"], cwd=PORTS, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    with open(os.path.join(FIXTURES, f"{name}_jax.txt")) as f:
        want = _numbers(f.read())
    got = _numbers(result.stdout)
    assert got.shape == want.shape and len(want) >= 8
    rtol, atol = NAMES[name]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
