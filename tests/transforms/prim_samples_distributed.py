"""Samples of fgrad.distributed's collectives for the conformance table.

The table runs in a job of one process, where every collective is an identity (all_gather
adds a process axis of size 1); tests/distributed/ checks the values across 2 processes.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from prim_samples import F64, Case

Gen = Callable[[np.random.Generator], list[Case]]


def _operands(rng: np.random.Generator) -> list[np.ndarray]:
    return [rng.normal(size=(2, 3)).astype(F64), rng.normal(size=(4,)).astype(F64)]


def _elementwise(rng: np.random.Generator) -> list[Case]:
    return [Case([rng.normal(size=(3,)).astype(F64)]), Case(_operands(rng)),
            Case([rng.normal(size=()).astype(F64)])]


def _gather(rng: np.random.Generator) -> list[Case]:
    return [Case(_operands(rng), dict(tiled=False, axis_size=1)),
            Case(_operands(rng), dict(tiled=True, axis_size=1)),
            Case([rng.normal(size=()).astype(F64)], dict(tiled=False, axis_size=1))]


def _broadcast(rng: np.random.Generator) -> list[Case]:
    return [Case(_operands(rng), dict(root=0, axis_size=1))]


COLLECTIVES: dict[str, Gen] = {"psum": _elementwise, "pmean": _elementwise,
                               "pmax": _elementwise, "pmin": _elementwise,
                               "all_gather": _gather, "process_broadcast": _broadcast}
