"""JAX's `shard_map` on fgrad's one device (reached as `fgrad.shard_map`).

`shard_map(f, mesh=mesh, in_specs=..., out_specs=...)` runs `f` once per device on that
device's block of each argument. fgrad has one device, so every mesh axis has size 1 and the
one block is the whole array: `f` runs once on the whole arguments, with each mesh axis name
bound as a named axis of size 1, so that `lax.psum`, `pmean`, `pmax`, `pmin`, `all_gather`
and `axis_index` over those names work inside `f` (a psum over a size-1 axis is the value
itself, `axis_index` is 0, `all_gather` adds an axis of length 1). The specs are validated
against the mesh and the arrays, and recorded nowhere else: nothing is split or moved.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from fgrad.core import tree_util
from fgrad.core.api_util import fn_name
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.transforms.extras.sharding import Mesh, PartitionSpec, check_spec, get_mesh

__all__ = ["shard_map"]


def _check_tree(specs: Any, values: Any, mesh: Mesh, who: str) -> None:
    """`specs` (a pytree prefix of `values` whose leaves are PartitionSpecs or None) checked
    against the mesh and each array's rank."""
    def is_spec(s: Any) -> bool:
        return s is None or isinstance(s, PartitionSpec)

    def check(spec: Any, sub: Any) -> None:
        if spec is None:
            return
        for leaf in tree_util.tree_leaves(sub):
            check_spec(spec, mesh, who, getattr(leaf, "ndim", None))

    if is_spec(specs):
        check(specs, values)
        return
    try:
        tree_util.tree_map(check, specs, values, is_leaf=is_spec)
    except (ValueError, TypeError) as err:
        if who in str(err):
            raise
        raise ValueError(f"{who}: the specs {specs!r} are not a pytree prefix of the values "
                         f"(structure {tree_util.tree_structure(values)}): {err}") from None


def shard_map(f: Callable[..., Any] | None = None, /, *, out_specs: Any,
              in_specs: Any = None, mesh: Mesh | None = None,
              axis_names: Any = frozenset(), check_vma: bool = True,
              check_rep: bool | None = None) -> Any:
    """JAX's `shard_map(f, mesh=..., in_specs=..., out_specs=...)` on fgrad's one device:
    `f` runs once on the whole arguments with each mesh axis name (or only `axis_names`,
    when given) bound as a size-1 named axis, so collectives over those names work. `mesh`
    defaults to the current one (`fgrad.set_mesh`); `in_specs` / `out_specs` are pytree
    prefixes of the arguments (a tuple, one per argument) and outputs, of PartitionSpecs,
    validated against the mesh, never applied. `check_vma` / `check_rep` are accepted and
    ignored: with size-1 axes every value is the same on every (one) device. Without `f`,
    returns a decorator."""
    if f is None:
        return functools.partial(shard_map, out_specs=out_specs, in_specs=in_specs,
                                 mesh=mesh, axis_names=axis_names, check_vma=check_vma,
                                 check_rep=check_rep)
    if not callable(f):
        raise TypeError(f"shard_map: f must be callable, got {type(f).__name__}")
    who = f"shard_map({fn_name(f)})"

    @functools.wraps(f)
    def mapped(*args: Any) -> Any:
        from fgrad.transforms.batching import vmap
        chosen = mesh if mesh is not None else get_mesh()
        if not isinstance(chosen, Mesh):
            raise ValueError(f"{who}: no mesh; pass mesh=fgrad.make_mesh(...) or call inside "
                             f"`with fgrad.set_mesh(mesh):`")
        names = tuple(n for n in chosen.axis_names if not axis_names or n in axis_names)
        unknown = [n for n in axis_names if n not in chosen.axis_names]
        if unknown:
            raise ValueError(f"{who}: axis_names {unknown} are not axes of the mesh "
                             f"{chosen.axis_names}")
        if in_specs is not None:
            specs = in_specs
            if isinstance(specs, tuple) and not isinstance(specs, PartitionSpec) \
                    and len(specs) != len(args):
                raise ValueError(f"{who}: in_specs has {len(specs)} entries but the function "
                                 f"got {len(args)} positional arguments")
            _check_tree(specs, args, chosen, who + " in_specs")
        body: Callable[..., Any] = f
        for name in reversed(names):
            body = vmap(body, in_axes=None, out_axes=0, axis_size=1, axis_name=name)
        out = body(*args)
        k = len(names)

        def squeeze(leaf: Any) -> Any:
            t = leaf if isinstance(leaf, Tensor) else as_tensor(leaf)
            return t.reshape(tuple(t.shape[k:])) if k else t
        out = tree_util.tree_map(squeeze, out)
        _check_tree(out_specs, out, chosen, who + " out_specs")
        return out

    return mapped
