"""Building an optimizer, schedule or loss from the JSON specs that
fixtures/gen_optax_compat.py stores beside Optax's numbers, with either library's module
(optax there, fgrad.optim in test_optax_compat.py)."""
from __future__ import annotations

from typing import Any


def _key(x: Any) -> Any:
    """JSON object keys are strings; integer-looking ones are schedule boundaries."""
    return int(x) if isinstance(x, str) and x.lstrip("-").isdigit() else x


def build(module: Any, spec: Any) -> Any:
    """The object `spec` describes, made with `module`'s functions (optax or fgrad.optim)."""
    if isinstance(spec, list):
        return [build(module, x) for x in spec]
    if not isinstance(spec, dict):
        return spec
    if "ref" in spec:
        return getattr(module, spec["ref"])
    if "fn" not in spec:
        return {_key(k): build(module, v) for k, v in spec.items()}
    out = getattr(module, spec["fn"])(*build(module, spec["args"]),
                                      **{k: build(module, v) for k, v in spec["kwargs"].items()})
    if "call" in spec:
        out = out(**{k: build(module, v) for k, v in spec["call"].items()})
    return out
