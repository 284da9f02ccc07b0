"""JAX's sharding API on fgrad's one device (reached as `fgrad.sharding`): `Mesh`,
`make_mesh`, `PartitionSpec` (`P`), `NamedSharding`, `SingleDeviceSharding`, `AxisType`,
`set_mesh` / `use_mesh` / `get_mesh`, and `reshard`, `device_put` and
`with_sharding_constraint` over them.

fgrad runs a program on ONE device. A mesh therefore holds one device, and every mesh axis
has size 1: `make_mesh((fgrad.device_count(),), ("batch",))` works, a mesh asking for more
devices raises ValueError. Shardings are validated (a spec may name only the mesh's axes,
each at most once, and no more dimensions than the array has) and recorded, never applied:
no data is split or moved between devices, so a program written for a mesh computes the
same values here on the whole arrays. `shard_map` lives in `shard_map.py`.
"""
from __future__ import annotations

import enum
import math
from typing import Any

import numpy as np

from fgrad.core import tree_util
from fgrad.core import device as _device
from fgrad.core import tensor as _tensor
from fgrad.core.tensor import Tensor

__all__ = ["AxisType", "Mesh", "NamedSharding", "PartitionSpec", "Sharding",
           "SingleDeviceSharding", "device_put", "get_mesh", "make_mesh", "reshard",
           "set_mesh", "use_mesh", "with_sharding_constraint"]

_NOTE = "fgrad runs on one device, so every mesh axis has size 1"


class AxisType(enum.Enum):
    """How a mesh axis is partitioned (JAX's `AxisType`): recorded only; with one device
    every kind behaves the same."""
    Auto = enum.auto()
    Explicit = enum.auto()
    Manual = enum.auto()


class PartitionSpec(tuple):
    """How each array dimension maps to mesh axes: one entry per leading dimension, each
    None (not split), a mesh axis name, or a tuple of names. `P()` is fully replicated;
    missing trailing entries mean None. On fgrad's one device it is only validated."""

    def __new__(cls, *entries: Any) -> "PartitionSpec":
        for e in entries:
            names = e if isinstance(e, tuple) else (e,)
            if e is not None and not all(isinstance(n, str) for n in names):
                raise TypeError(f"PartitionSpec: each entry must be None, a mesh axis name "
                                f"(str) or a tuple of names, got {e!r}")
        return super().__new__(cls, entries)

    def __repr__(self) -> str:
        return "PartitionSpec(" + ", ".join(repr(e) for e in self) + ")"

    def axis_names(self) -> list[str]:
        """Every mesh axis name the spec uses, in order."""
        out: list[str] = []
        for e in self:
            out += list(e) if isinstance(e, tuple) else [] if e is None else [e]
        return out


P = PartitionSpec


def _default_devices() -> list[str]:
    from fgrad import flags
    from fgrad.transforms.extras.devices import local_devices
    return local_devices(backend=flags.default_backend())


class Mesh:
    """A named grid of devices (JAX's `Mesh(devices, axis_names, axis_types=None)`). fgrad has
    one device per program, so the grid holds exactly one device and every axis has size 1;
    a larger grid raises ValueError. Also a context manager that sets the current mesh."""

    def __init__(self, devices: Any, axis_names: str | tuple[str, ...] | list[str],
                 axis_types: Any = None):
        names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
        if not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
            raise ValueError(f"Mesh: axis_names must be distinct strings, got {axis_names!r}")
        grid = np.array(devices, dtype=object)
        if grid.ndim != len(names):
            raise ValueError(f"Mesh: devices has {grid.ndim} dimensions {grid.shape} but "
                             f"{len(names)} axis names {names} were given; give one per axis")
        if grid.size != 1:
            raise ValueError(f"Mesh: the device grid {grid.shape} holds {grid.size} devices, "
                             f"but fgrad runs a program on 1 device (device_count() == 1); "
                             f"{_NOTE}: use fgrad.make_mesh((1,) * n, names)")
        self.devices = np.array([_device.canonical_device(d) for d in grid.flat],
                                dtype=object).reshape(grid.shape)
        self.axis_names: tuple[str, ...] = names
        self.axis_types = _axis_types(axis_types, len(names), "Mesh")

    @property
    def device(self) -> str:
        """The mesh's one device ('CPU' or 'CL:<n>')."""
        return str(self.devices.flat[0])

    @property
    def shape(self) -> dict[str, int]:
        """Axis name -> size (all 1 here)."""
        return dict(zip(self.axis_names, self.devices.shape))

    @property
    def axis_sizes(self) -> tuple[int, ...]:
        """The size of each axis (all 1 here)."""
        return tuple(self.devices.shape)

    @property
    def size(self) -> int:
        """The number of devices: 1."""
        return int(self.devices.size)

    @property
    def empty(self) -> bool:
        """Whether the mesh has no devices (never, for a constructed mesh)."""
        return self.size == 0

    @property
    def device_ids(self) -> np.ndarray:
        """The device grid as integer ids (here one 0 per axis)."""
        return np.zeros(self.devices.shape, dtype=np.int64)

    def __enter__(self) -> "Mesh":
        _STACK.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _STACK.pop()

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Mesh) and other.axis_names == self.axis_names and \
            other.devices.shape == self.devices.shape and other.device == self.device

    def __hash__(self) -> int:
        return hash((self.axis_names, self.devices.shape, self.device))

    def __repr__(self) -> str:
        axes = ", ".join(f"'{n}': {s}" for n, s in self.shape.items())
        return f"Mesh(device={self.device!r}, axis_sizes={{{axes}}})"


def _axis_types(axis_types: Any, n: int, who: str) -> tuple[AxisType, ...]:
    if axis_types is None:
        return (AxisType.Auto,) * n
    types = (axis_types,) if isinstance(axis_types, AxisType) else tuple(axis_types)
    if len(types) != n or not all(isinstance(t, AxisType) for t in types):
        raise ValueError(f"{who}: axis_types must be {n} AxisType values (one per axis), "
                         f"got {axis_types!r}")
    return types


def make_mesh(axis_shapes: tuple[int, ...] | list[int], axis_names: tuple[str, ...] | list[str],
              axis_types: Any = None, *, devices: Any = None) -> Mesh:
    """JAX's `make_mesh`: a mesh of shape `axis_shapes` named `axis_names` over `devices`
    (default: the devices of the jit backend). fgrad has one device, so the product of
    `axis_shapes` must be 1 (`make_mesh((fgrad.device_count(),), ('batch',))`); more
    raises ValueError naming both counts."""
    shape = tuple(int(s) for s in axis_shapes)
    names = tuple(axis_names)
    if len(shape) != len(names):
        raise ValueError(f"make_mesh: {len(shape)} axis_shapes {shape} but {len(names)} "
                         f"axis_names {names}; give one name per axis")
    found = list(devices) if devices is not None else _default_devices()
    wanted = math.prod(shape)
    if wanted != 1 or len(found) < 1:
        raise ValueError(f"make_mesh: the mesh shape {shape} asks for {wanted} devices, but "
                         f"fgrad runs a program on 1 device (device_count() == 1); {_NOTE}")
    return Mesh(np.array(found[:1], dtype=object).reshape(shape), names, axis_types)


# ---------------------------------------------------------------------------- current mesh

_STACK: list[Mesh] = []


def get_mesh() -> Mesh | None:
    """The mesh set by `set_mesh` / `use_mesh` / `with mesh:` (None when none is set)."""
    return _STACK[-1] if _STACK else None


class set_mesh:
    """JAX's `set_mesh(mesh)`: makes `mesh` the current mesh now; used as a context manager
    (`with fgrad.set_mesh(mesh):`) the previous one comes back at the end of the block."""

    def __init__(self, mesh: Mesh | None):
        if mesh is not None and not isinstance(mesh, Mesh):
            raise TypeError(f"set_mesh: expected a Mesh, got {type(mesh).__name__}")
        self._previous = list(_STACK)
        _STACK[:] = [] if mesh is None else [mesh]

    def __enter__(self) -> Mesh | None:
        return get_mesh()

    def __exit__(self, *exc: Any) -> None:
        _STACK[:] = self._previous


def use_mesh(mesh: Mesh) -> set_mesh:
    """`with fgrad.sharding.use_mesh(mesh):` the current mesh inside the block."""
    return set_mesh(mesh)


# ---------------------------------------------------------------------------- shardings


class Sharding:
    """The base of fgrad's shardings: where an array's pieces live. On fgrad's one device
    every sharding keeps the whole array on that device."""

    @property
    def device(self) -> str:
        """The one device holding the whole array."""
        raise NotImplementedError

    @property
    def device_set(self) -> set[str]:
        """The devices holding the array: its one device."""
        return {self.device}

    @property
    def num_devices(self) -> int:
        """1: fgrad has one device."""
        return 1

    @property
    def is_fully_replicated(self) -> bool:
        """True: the one device holds the whole array."""
        return True

    @property
    def is_fully_addressable(self) -> bool:
        """True: the one device belongs to this process."""
        return True

    def shard_shape(self, global_shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of the piece on each device: the whole `global_shape`."""
        return tuple(global_shape)


class SingleDeviceSharding(Sharding):
    """The whole array on one device (JAX's `SingleDeviceSharding(device)`)."""

    def __init__(self, device: str, *, memory_kind: str | None = None):
        self._device = _device.canonical_device(device)
        self.memory_kind = memory_kind

    @property
    def device(self) -> str:
        """The device's name."""
        return self._device

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, SingleDeviceSharding) and other.device == self.device

    def __hash__(self) -> int:
        return hash(("single", self._device))

    def __repr__(self) -> str:
        return f"SingleDeviceSharding(device={self._device!r})"


def check_spec(spec: Any, mesh: Mesh, who: str, ndim: int | None = None) -> PartitionSpec:
    """`spec` checked against `mesh` (and an array of `ndim` dimensions): a clear error
    when it is not a PartitionSpec, names an axis the mesh lacks or uses one twice."""
    if not isinstance(spec, PartitionSpec):
        raise TypeError(f"{who}: expected a PartitionSpec (fgrad.sharding.PartitionSpec / P), "
                        f"got {type(spec).__name__} {spec!r}")
    used = spec.axis_names()
    unknown = [n for n in used if n not in mesh.axis_names]
    if unknown:
        raise ValueError(f"{who}: {spec!r} names mesh axes {unknown} that the mesh does not "
                         f"have; its axes are {mesh.axis_names}")
    twice = sorted({n for n in used if used.count(n) > 1})
    if twice:
        raise ValueError(f"{who}: {spec!r} uses mesh axes {twice} more than once")
    if ndim is not None and len(spec) > ndim:
        raise ValueError(f"{who}: {spec!r} has {len(spec)} entries but the array has only "
                         f"{ndim} dimensions")
    return spec


class NamedSharding(Sharding):
    """JAX's `NamedSharding(mesh, spec)`: array dimensions split over named mesh axes. The
    spec is validated against the mesh; on fgrad's one device (every axis of size 1) the
    whole array stays on the mesh's device."""

    def __init__(self, mesh: Mesh, spec: PartitionSpec = PartitionSpec(), *,
                 memory_kind: str | None = None):
        if not isinstance(mesh, Mesh):
            raise TypeError(f"NamedSharding: mesh must be a Mesh (fgrad.make_mesh), got "
                            f"{type(mesh).__name__}")
        self.mesh, self.spec = mesh, check_spec(spec, mesh, "NamedSharding")
        self.memory_kind = memory_kind

    @property
    def device(self) -> str:
        """The mesh's device."""
        return self.mesh.device

    def with_spec(self, spec: PartitionSpec) -> "NamedSharding":
        """The same mesh with another spec."""
        return NamedSharding(self.mesh, spec, memory_kind=self.memory_kind)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, NamedSharding) and other.mesh == self.mesh and \
            tuple(other.spec) == tuple(self.spec)

    def __hash__(self) -> int:
        return hash((self.mesh, tuple(self.spec)))

    def __repr__(self) -> str:
        return f"NamedSharding(mesh={self.mesh!r}, spec={self.spec!r})"


def resolve(target: Any, who: str, ndim: int | None = None) -> Sharding:
    """A Sharding from a Sharding, or a PartitionSpec read against the current mesh."""
    if isinstance(target, PartitionSpec):
        mesh = get_mesh()
        if mesh is None:
            raise ValueError(f"{who}: a bare {target!r} needs a current mesh; wrap it as "
                             f"NamedSharding(mesh, spec) or call inside fgrad.set_mesh(mesh)")
        check_spec(target, mesh, who, ndim)
        return NamedSharding(mesh, target)
    if isinstance(target, NamedSharding):
        check_spec(target.spec, target.mesh, who, ndim)
        return target
    if isinstance(target, Sharding):
        return target
    raise TypeError(f"{who}: expected a Sharding or a PartitionSpec, got "
                    f"{type(target).__name__} {target!r}")


def _is_target(x: Any) -> bool:
    return x is None or isinstance(x, (Sharding, PartitionSpec, str))


def check_shardings(tree: Any, who: str) -> None:
    """Validate a pytree of shardings / specs / None (jit's in_shardings / out_shardings):
    NamedShardings against their mesh, bare specs against the current mesh when one is set
    (otherwise they only need to be well-formed PartitionSpecs)."""
    for leaf in tree_util.tree_leaves(tree, is_leaf=_is_target):
        if leaf is None or isinstance(leaf, str):
            if isinstance(leaf, str):
                raise TypeError(f"{who}: expected shardings or PartitionSpecs, got the "
                                f"string {leaf!r}; write P({leaf!r})")
        elif isinstance(leaf, PartitionSpec) and get_mesh() is None:
            continue
        else:
            resolve(leaf, who)


# ---------------------------------------------------------------------------- placing arrays


def _place(target: Any, sub: Any, who: str) -> Any:
    """Every leaf of `sub` as a Tensor on the device `target` names (None: the default)."""
    if target is None:
        from fgrad.transforms.extras.states import default_device
        name = default_device.value or "CPU"
    elif isinstance(target, str):
        name = target
    else:
        def one(leaf: Any) -> Any:
            t = leaf if isinstance(leaf, Tensor) else Tensor(leaf)
            return t.to(resolve(target, who, t.ndim).device)
        return tree_util.tree_map(one, sub)
    return _device.device_put(sub, name)


def device_put(x: Any, device: Any = None, *, src: Any = None, donate: bool = False,
               may_alias: bool | None = None) -> Any:
    """JAX's `device_put`: every leaf of the pytree `x` as a Tensor on `device`: a device
    name ('CPU', 'CL:<n>'), a Sharding, a PartitionSpec (read against the current mesh),
    None (the default device) or a pytree prefix of `x` of these. A sharding is validated
    against the leaf and the leaf goes, whole, to the sharding's one device: fgrad has one
    device, so nothing is split. `src`, `donate` and `may_alias` are accepted and ignored."""
    if _is_target(device):
        return _place(device, x, "device_put")
    return tree_util.tree_map(lambda t, sub: _place(t, sub, "device_put"), device, x,
                              is_leaf=_is_target)


def _identity_checked(x: Any, shardings: Any, who: str) -> Any:
    def check(target: Any, sub: Any) -> Any:
        if target is not None:
            for leaf in tree_util.tree_leaves(sub):
                resolve(target, who, getattr(leaf, "ndim", np.ndim(leaf)))
        return sub
    if _is_target(shardings):
        return check(shardings, x)
    return tree_util.tree_map(check, shardings, x, is_leaf=_is_target)


def reshard(x: Any, shardings: Any) -> Any:
    """JAX's `reshard`: `x` (a pytree) with the given shardings / specs (a pytree prefix of
    `x`). On fgrad's one device this validates them and returns the leaves as Tensors,
    unchanged; works on traced values too."""
    checked = _identity_checked(x, shardings, "reshard")
    return tree_util.tree_map(lambda v: v if isinstance(v, Tensor) else Tensor(v), checked)


def with_sharding_constraint(x: Any, shardings: Any) -> Any:
    """JAX's `lax.with_sharding_constraint`: `x` itself, after validating `shardings` (a
    pytree prefix of `x`) against each leaf. fgrad has one device: the constraint is checked
    and recorded nowhere else, never applied; works under jit, grad and vmap."""
    return _identity_checked(x, shardings, "with_sharding_constraint")



_tensor.SHARDING_OF[0] = SingleDeviceSharding
