"""The native pool under contention (fgrad/lower/llvm/pool.py): a thread taken off its CPU for
over a millisecond inside a spin loop sets the deadline that makes workers spin short, a
pinned worker moves off the caller's CPU, and results stay right.

Busy neighbour processes preempt the pool's threads only when the scheduler chooses (a CI
machine once ran 20 s of split products beside two of them without one preemption inside a
spin), so the probe here is descheduled on purpose: SIGSTOP and SIGCONT every few
milliseconds, as a host that gives a virtual CPU's time to another guest does."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from fgrad.lower.llvm import pool
from fgrad.lower.llvm.threads import POOL
from subprocess_probe import REPO, run_probe

pytestmark = pytest.mark.skipif(not isinstance(POOL, pool.NativePool),
                                reason="the native pool runs on x86-64 Linux")

SPLIT_PRODUCT = """
    import os, threading, time
    import numpy as np
    import fgrad
    from fgrad import Tensor
    from fgrad.lower.llvm.threads import POOL

    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((384, 384)).astype(np.float32) for _ in range(2))
    want = a.astype(np.float64) @ b
    f = fgrad.jit(lambda x, y: x @ y, backend="llvm")

    def checked_call():
        got = f(Tensor(a), Tensor(b)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)

    checked_call()
"""

PROBE = SPLIT_PRODUCT + """
    before = POOL.contended_until()
    print("ready", flush=True)
    deadline = time.monotonic() + 60
    while POOL.contended_until() == before and time.monotonic() < deadline:
        checked_call()
    print(POOL.contended_until() > before, flush=True)
"""


def test_a_descheduled_spinning_thread_sets_the_contention_deadline() -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    probe = subprocess.Popen([sys.executable, "-c", textwrap.dedent(PROBE)], cwd=REPO,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        assert probe.stdout is not None
        assert probe.stdout.readline().strip() == "ready", probe.communicate()[1]
        give_up = time.monotonic() + 90
        while probe.poll() is None and time.monotonic() < give_up:
            time.sleep(0.004)
            os.kill(probe.pid, signal.SIGSTOP)
            time.sleep(0.003)
            os.kill(probe.pid, signal.SIGCONT)
        out, err = probe.communicate(timeout=90)
    finally:
        if probe.poll() is None:
            probe.kill()
            probe.wait()
    assert probe.returncode == 0, err
    assert out.split() == ["True"]


FOLLOW_PROBE = SPLIT_PRODUCT + """
    worker = next(t for t in threading.enumerate() if t.name == "fgrad-llvm-1")
    cpus = sorted(os.sched_getaffinity(0))
    home, away = cpus[1], cpus[0]

    def worker_cpus_after_calls_on(caller_cpu):
        os.sched_setaffinity(0, {caller_cpu})
        for _ in range(300):
            checked_call()
            if os.sched_getaffinity(worker.native_id) == {home if caller_cpu == away else away}:
                break
        return sorted(os.sched_getaffinity(worker.native_id))

    print(worker_cpus_after_calls_on(home) == [away])    # the caller came: the worker leaves
    print(worker_cpus_after_calls_on(away) == [home])    # the caller went back: home again
    print(worker_cpus_after_calls_on(home) == [away])
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_a_pinned_worker_moves_off_the_callers_cpu() -> None:
    """The caller on the pinned worker's CPU (with a busy process on the other, the
    scheduler leaves them sharing it): the worker re-pins itself to the caller's usual
    CPU, and goes home when the caller leaves."""
    env = {"FGRAD_PIN_THREADS": "1", "FGRAD_NUM_THREADS": "2"}
    assert run_probe(FOLLOW_PROBE, env=env).split() == ["True", "True", "True"]
