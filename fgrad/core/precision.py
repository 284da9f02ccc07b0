"""The float64 policy: dtypes are kept, and mixing float64 into lower-precision floats warns.

fgrad does not silently narrow data: `Tensor(np.random.rand(3))` is float64, as in NumPy and
PyTorch's `from_numpy`. But when such a Tensor meets a float32 (or float16/bfloat16) Tensor in
one op, the result is float64 and the rest of the model runs in float64 (twice the memory
traffic, often slower, far slower on most GPUs). fgrad then emits `Float64PromotionWarning`,
pointing at the user's line; Python shows it once per line. Cast the data (`x.astype("float32")`,
`np.float32`) to stay in float32, or silence it with `fgrad.config.update("warn_float64",
False)` (or `FGRAD_WARN_FLOAT64=0`) when float64 is intended.
"""
from __future__ import annotations

import os
import sys
import warnings
from typing import Any

import numpy as np

__all__ = ["Float64PromotionWarning", "promote_checked", "warn_float64_promotion"]

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Float64PromotionWarning(UserWarning):
    """A float64 operand turned a lower-precision float computation into float64."""


def _enabled() -> bool:
    from fgrad.flags import setting, x64_enabled
    return bool(setting("warn_float64")) and not x64_enabled()


def _user_stacklevel() -> int:
    """The `stacklevel` that makes a warning point at the first frame outside fgrad."""
    frame: Any = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    return level


def promote_checked(a: Any, b: Any, op: str) -> Any:
    """`dtypes.promote(a, b)` for the Tensor operands of `op`, warning when a float64 operand
    widens a lower-precision float one."""
    from fgrad.core.dtypes import dtypes, promote
    out = promote(a, b)
    if a != b and a.kind == "f" == b.kind and out == dtypes.float64:
        warn_float64_promotion(a, b, op)
    return out


def warn_float64_promotion(a: Any, b: Any, op: str = "an op") -> None:
    """Warn that floats `a` and `b` (DTypes, one of them float64) promote to float64."""
    if not _enabled():
        return
    narrow = a if a.itemsize < b.itemsize else b
    narrow_name = str(np.dtype(narrow.np))
    warnings.warn(
        f"{op}: a float64 operand meets a {narrow_name} one, so the result (and everything "
        f"computed from it) is float64, which is often slower. NumPy arrays are float64 "
        f"by default: cast them with x.astype('float32') or np.asarray(x, np.float32). If "
        f"float64 is intended, silence this with fgrad.config.update('warn_float64', False).",
        Float64PromotionWarning, stacklevel=_user_stacklevel())
