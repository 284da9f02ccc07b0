"""`debug_nans` / `debug_infs` on the eager path: check each primitive's float outputs.

With either setting on, every primitive evaluated eagerly (outside jit, including the
backward pass of an eager `grad`) has its float outputs checked; the first one holding a NaN
(or an infinity) raises `FloatingPointError` naming the primitive, its inputs' dtypes and
shapes, and the user's source line. As in JAX, an op raises even when the NaN came in
through its inputs (the message then says so), so data that already holds NaN stops at the
first op that touches it. Jitted calls are checked as a whole by `transforms/nan_check.py`,
which reruns them op by op with the same message. Off (the default), the eager path pays one
flag read per primitive.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from fgrad import flags
from fgrad.core.device import to_host


def rejected_kind(arr: Any) -> str | None:
    """'NaN' / 'inf' when `arr` (a NumPy array or scalar) holds a value the current
    settings reject, else None."""
    a = np.asarray(arr)
    if a.dtype.kind not in "fc" or a.size == 0:
        return None
    if flags.setting("debug_nans") and np.isnan(a).any():
        return "NaN"
    if flags.setting("debug_infs") and np.isinf(a).any():
        return "inf"
    return None


def first_rejected(arrays: Sequence[Any]) -> str | None:
    """The kind of the first rejected value among `arrays`, else None."""
    return next((kind for kind in map(rejected_kind, arrays) if kind), None)


def nonfinite_error(kind: str, prim_name: str, where: str, source: Any,
                    inputs: Sequence[Any]) -> FloatingPointError:
    """The error raised when primitive `prim_name` produced `kind` ('NaN' or 'inf')."""
    flag = "debug_nans" if kind == "NaN" else "debug_infs"
    src = f" at {source}" if source is not None else ""
    bad_in = " (an input was already non-finite)" if first_rejected(inputs) else ""
    shapes = ", ".join(f"{np.asarray(i).dtype}{list(np.shape(i))}" for i in inputs)
    return FloatingPointError(
        f"{flag}: primitive '{prim_name}' produced {kind} in {where}{src}{bad_in}; its "
        f"inputs: ({shapes}). Turn the check off with fgrad.config.update('{flag}', False).")


def check_eager(prim_name: str, arrays: Sequence[Any], outs: Sequence[Any]) -> None:
    """After an eager primitive: raise when its outputs hold a rejected value. Device
    (OpenCL) results are checked too, by reading them back."""
    kind = first_rejected([to_host(o) for o in outs])
    if kind is None:
        return
    from fgrad.core.staging import user_source
    ins = [to_host(a) for a in arrays]
    raise nonfinite_error(kind, prim_name, "eager evaluation", user_source(), ins)
