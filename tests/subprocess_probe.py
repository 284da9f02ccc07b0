"""Run a crash-class probe in a fresh interpreter, so a regression fails a test instead of
killing the test run (segfaults, hangs, process-wide state corruption)."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

REPO = pathlib.Path(__file__).resolve().parent.parent


def run_probe(code: str, timeout: float = 240.0, env: dict[str, str] | None = None) -> str:
    """Run `code` in a new Python process with this checkout's fgrad; return its stdout.

    Fails the calling test (with the probe's stderr) on a non-zero exit, a signal such as
    SIGSEGV, or a hang past `timeout` seconds.
    """
    full_env = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    try:
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO,
                              env=full_env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as err:
        raise AssertionError(f"probe hung for more than {timeout} s:\n{err.stderr}") from None
    if done.returncode != 0:
        raise AssertionError(f"probe exited with {done.returncode} (negative = signal):\n"
                             f"{done.stdout}\n{done.stderr}")
    return done.stdout
