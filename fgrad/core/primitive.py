"""Primitives and the rule registry.

A `Primitive` is one registry entry holding every rule about it: `abstract_eval` (avals in,
avals out, with user-facing shape/dtype errors), `impl` (NumPy arrays in and out), `jvp`,
`transpose` (linear primitives only), `batch`, and `lowerings[backend]`. Transforms never hold
per-primitive code: they look the rule up here.

Rule signatures (for a single-result primitive; multiple-result ones use lists):
    abstract_eval(*avals, **params) -> aval
    impl(*arrays, **params) -> array
    jvp(primals, tangents, **params) -> (primal_out, tangent_out)
    transpose(ct, *args, **params) -> [ct_for_each_arg or None]   (UndefinedPrimal args)
    batch(args, dims, **params) -> (out, out_dim)
"""
from __future__ import annotations

from typing import Any, Callable

REGISTRY: dict[str, "Primitive"] = {}
SEMANTIC_RULES = ("abstract_eval", "impl", "jvp", "batch")
BACKENDS = ("llvm", "opencl")  # "numpy" is the reference interpreter: `impl`


class MissingRuleError(NotImplementedError):
    """A primitive lacks the rule a transformation or backend needs."""


class Primitive:
    """A primitive operation: a name plus its rules (see the module docstring)."""

    def __init__(self, name: str, *, multiple_results: bool = False, linear: bool = False):
        if name in REGISTRY:
            raise ValueError(f"primitive {name!r} is already registered")
        self.name = name
        self.multiple_results = multiple_results
        self.linear = linear
        self.abstract_eval: Callable[..., Any] = self._missing("abstract_eval")
        self.impl: Callable[..., Any] = self._missing("impl")
        self.jvp: Callable[..., Any] | None = None
        self.transpose: Callable[..., Any] | None = None
        self.batch: Callable[..., Any] | None = None
        self.partial_eval: Callable[..., Any] | None = None
        self.lowerings: dict[str, str] = {}  # backend -> how it lowers this (fgrad.lower)
        REGISTRY[name] = self

    def _missing(self, rule: str) -> Callable[..., Any]:
        def missing(*args: Any, **params: Any) -> Any:
            raise MissingRuleError(f"primitive '{self.name}' has no {rule} rule")
        missing.is_missing = True  # type: ignore[attr-defined]  # a marker, read by getattr
        return missing

    def bind(self, *args: Any, **params: Any) -> Any:
        """Apply the primitive through the current trace (eager, staging, jvp, vmap, ...)."""
        from fgrad.core.trace import current_trace
        outs = current_trace().process_primitive(self, args, params)
        return outs if self.multiple_results else outs[0]

    # Normalized views used by the interpreters: always lists.
    def abstract_eval_list(self, *avals: Any, **params: Any) -> list[Any]:
        out = self.abstract_eval(*avals, **params)
        return list(out) if self.multiple_results else [out]

    def impl_list(self, *arrays: Any, **params: Any) -> list[Any]:
        out = self.impl(*arrays, **params)
        return list(out) if self.multiple_results else [out]

    def rule(self, kind: str) -> Callable[..., Any]:
        """The rule of this kind, or a MissingRuleError naming the primitive and the rule."""
        fn = getattr(self, kind, None) if kind != "lowering" else None
        if fn is None or getattr(fn, "is_missing", False):
            raise MissingRuleError(
                f"primitive '{self.name}' has no {kind} rule, so this transformation cannot "
                f"be applied to it. Define {self.name}_p.{kind} (see fgrad/core/primitive.py).")
        return fn

    def __repr__(self) -> str:
        return f"Primitive({self.name})"


def missing_rules() -> dict[str, list[str]]:
    """For every primitive, the semantic rules and backend lowerings it lacks."""
    gaps: dict[str, list[str]] = {}
    for name, prim in sorted(REGISTRY.items()):
        lacking = [r for r in SEMANTIC_RULES
                   if getattr(prim, r) is None or getattr(getattr(prim, r), "is_missing", False)]
        if prim.linear and prim.transpose is None:
            lacking.append("transpose")
        lacking += [f"lowering:{b}" for b in BACKENDS if b not in prim.lowerings]
        if lacking:
            gaps[name] = lacking
    return gaps
