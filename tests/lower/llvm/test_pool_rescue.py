"""The pool's rescue (fgrad/lower/llvm/pool_rescue.py): a worker that is off its CPU inside
a part is moved onto the waiting caller's CPU, finishes there, and goes home afterwards; a
worker that runs is never moved.

The worker's part here sleeps (its CPU clock stands still, as a preempted worker's does);
a pinned caller watches, from a third thread, where the worker may run meanwhile."""
from __future__ import annotations

import os

import pytest

from fgrad.lower.llvm import pool
from fgrad.lower.llvm.threads import POOL
from subprocess_probe import run_probe

pytestmark = [
    pytest.mark.skipif(not isinstance(POOL, pool.NativePool),
                       reason="the native pool runs on x86-64 Linux"),
    pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs"),
]

PROBE = """
    import ctypes, os, threading, time
    from fgrad.lower.llvm.threads import POOL

    cpus = sorted(os.sched_getaffinity(0))
    home, away = cpus[1], cpus[0]
    entered, tids, done = threading.Event(), [], []
    WORK = {WORK!r}

    @ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p)
    def entry(table, thread, state):
        if thread == 0:
            entered.wait(10)                 # close the part only once the worker is in,
            time.sleep(0.01)                 # and has the interpreter's lock to itself
            return
        tids.append(threading.get_native_id())
        entered.set()
        if WORK == "sleep":
            time.sleep(0.1)                  # off its CPU: its CPU clock stands still
        else:
            end = time.thread_time() + 0.1   # on its CPU all along
            while time.thread_time() < end:
                pass
        done.append(sorted(os.sched_getaffinity(0)))

    table, state = (ctypes.c_int64 * 4)(), (ctypes.c_int64 * 8)()
    address = ctypes.cast(entry, ctypes.c_void_p).value
    POOL.run(entry, address, table, state, 2)          # starts the worker (pinned home)
    os.sched_setaffinity(0, {away})          # the caller: on the worker's `away` CPU
    entered.clear(); done.clear(); tids.clear()
    before = POOL.rescues()
    POOL.run(entry, address, table, state, 2)
    print(len(done) == 1)                              # the caller waited for the worker
    print(POOL.rescues() - before)                     # once: it stays moved
    print(done[0] == [away] if WORK == "sleep" else done[0])    # where the part ended
    time.sleep(0.05)
    print(sorted(os.sched_getaffinity(tids[0])) == [home])      # home again afterwards
"""


def test_a_worker_off_its_cpu_moves_to_the_waiting_caller() -> None:
    env = {"FGRAD_PIN_THREADS": "1", "FGRAD_NUM_THREADS": "2"}
    out = run_probe(PROBE.replace("{WORK!r}", repr("sleep")), env=env).split()
    assert out == ["True", "1", "True", "True"]


def test_a_running_worker_stays_where_it_is() -> None:
    """Unless something else took its CPU meanwhile (the tests' other processes may): then
    it was moved once, and finished on the caller's CPU."""
    env = {"FGRAD_PIN_THREADS": "1", "FGRAD_NUM_THREADS": "2"}
    ok, rescues, where, home_again = run_probe(PROBE.replace("{WORK!r}", repr("spin")),
                                               env=env).split()
    cpus = sorted(os.sched_getaffinity(0))
    assert (ok, home_again) == ("True", "True")
    assert (rescues, where) in {("0", f"[{cpus[1]}]"), ("1", f"[{cpus[0]}]")}
