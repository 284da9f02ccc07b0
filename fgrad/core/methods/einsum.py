"""einsum on dot_general: parse, take diagonals, sum private indices, contract pairwise.

Each operand becomes a (Tensor, labels) term. A label repeated within one operand is a
diagonal (a strided slice of the flattened pair of axes); a label seen in no other operand and
not in the output is summed at once; the rest are contracted left to right, one dot_general
per pair, keeping as batch axes the labels still needed later. Size-1 axes broadcast.
"""
from __future__ import annotations

import string
from typing import TYPE_CHECKING, Any, Sequence

from fgrad.core import dtypes as _dt
from fgrad.core import prims as P
from fgrad.core.errors import ArgumentError
from fgrad.core.prims._util import fmt_shape

if TYPE_CHECKING:
    from fgrad.core.tensor import Tensor

Term = tuple["Tensor", str]


def _operands(operands: tuple[Any, ...]) -> list["Tensor"]:
    from fgrad.core.tensor import as_tensor
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return [as_tensor(x) for x in operands]


def _expand_ellipsis(spec: str, ndim: int, ell: str, formula: str) -> str:
    if "..." not in spec:
        if len(spec) != ndim:
            raise ArgumentError(f"einsum: {spec!r} names {len(spec)} axes but its operand has "
                                f"{ndim} ({formula!r})")
        return spec
    n_ell = ndim - (len(spec) - 3)
    if n_ell < 0:
        raise ArgumentError(f"einsum: {spec!r} names more axes than its operand has ({ndim})")
    return spec.replace("...", ell[len(ell) - n_ell:])


def parse(formula: str, ndims: Sequence[int]) -> tuple[list[str], str]:
    """Input label strings (ellipses expanded) and the output label string."""
    formula = formula.replace(" ", "")
    lhs, arrow, rhs = formula.partition("->")
    specs = lhs.split(",")
    if len(specs) != len(ndims):
        raise ArgumentError(f"einsum: {formula!r} has {len(specs)} operands, got {len(ndims)}")
    used = set(formula) - set(".,->")
    if not all(c in string.ascii_letters for c in used):
        raise ArgumentError(f"einsum: subscripts must be letters, got {formula!r}")
    n_ell = max([nd - (len(s) - 3) for s, nd in zip(specs, ndims) if "..." in s] or [0])
    spare = [c for c in string.ascii_letters if c not in used]
    if n_ell > len(spare):
        raise ArgumentError(f"einsum: too many axes under '...' in {formula!r}")
    ell = "".join(spare[:n_ell])
    inputs = [_expand_ellipsis(s, nd, ell, formula) for s, nd in zip(specs, ndims)]
    if not arrow:
        joined = "".join(specs)
        return inputs, ell + "".join(sorted(c for c in set(joined) if joined.count(c) == 1
                                            and c != "."))
    output = rhs.replace("...", ell)
    missing = set(output) - set("".join(inputs))
    if len(set(output)) != len(output) or missing:
        raise ArgumentError(f"einsum: output {rhs!r} must name distinct subscripts that appear "
                            f"in the inputs ({formula!r})")
    return inputs, output


def diagonal(x: "Tensor", labels: str) -> Term:
    """Collapse every label repeated in `labels` to the diagonal of those axes."""
    for c in dict.fromkeys(labels):
        while labels.count(c) > 1:
            j = labels.index(c)
            k = labels.index(c, j + 1)
            n = x.shape[j]
            if x.shape[k] != n:
                raise ArgumentError(f"einsum: subscript {c!r} is repeated on axes of sizes "
                                    f"{n} and {x.shape[k]} of {fmt_shape(x.shape)}")
            rest = [i for i in range(x.ndim) if i not in (j, k)]
            x = P.transpose(x, rest + [j, k])
            lead = x.shape[:-2]
            x = P.reshape(x, lead + (n * n,))
            x = P.slice_(x, (0,) * x.ndim, x.shape, (1,) * len(lead) + (n + 1,))
            labels = "".join(labels[i] for i in rest) + c
    return x, labels


def sum_labels(term: Term, drop: set[str]) -> Term:
    """Sum the axes of `term` whose labels are in `drop`."""
    x, labels = term
    axes = tuple(i for i, c in enumerate(labels) if c in drop)
    if not axes:
        return term
    return P.reduce_sum(x, axes), "".join(c for c in labels if c not in drop)


def _sizes(terms: list[Term], formula: str) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for x, labels in terms:
        for c, n in zip(labels, x.shape, strict=True):
            seen = sizes.get(c, 1)
            if n != 1 and seen not in (1, n):
                raise ArgumentError(f"einsum: subscript {c!r} has sizes {seen} and {n} in "
                                    f"{formula!r}")
            sizes[c] = n if c not in sizes or seen == 1 else seen
    return sizes


def _broadcast(term: Term, sizes: dict[str, int], shared: str) -> Term:
    x, labels = term
    shape = tuple(sizes[c] if c in shared else n for c, n in zip(labels, x.shape))
    return (x if shape == x.shape else x.expand(shape)), labels


def contract(a: Term, b: Term, keep: set[str], sizes: dict[str, int]) -> Term:
    """One dot_general: batch over shared labels in `keep`, contract the other shared ones."""
    shared = "".join(c for c in a[1] if c in b[1])
    a = sum_labels(a, set(a[1]) - set(b[1]) - keep)
    b = sum_labels(b, set(b[1]) - set(a[1]) - keep)
    (x, la), (y, lb) = _broadcast(a, sizes, shared), _broadcast(b, sizes, shared)
    batch = [c for c in shared if c in keep]
    summed = [c for c in shared if c not in keep]
    dims = (([la.index(c) for c in summed], [lb.index(c) for c in summed]),
            ([la.index(c) for c in batch], [lb.index(c) for c in batch]))
    out = P.dot_general(x, y, dims)
    labels = ("".join(batch) + "".join(c for c in la if c not in lb)
              + "".join(c for c in lb if c not in la))
    return out, labels


def einsum(formula: str, *operands: Any, dtype: Any = None) -> "Tensor":
    """Einstein summation over Tensors, as torch.einsum: 'ij,jk->ik', 'ii->i', '...ij,...jk',
    implicit output (labels seen once, sorted), size-1 broadcasting. Operands are promoted
    to one dtype (or cast to `dtype`)."""
    xs = _operands(operands)
    if not xs:
        raise ArgumentError("einsum: needs at least one operand")
    inputs, output = parse(formula, [x.ndim for x in xs])
    common = _dt.to_dtype(dtype) if dtype is not None else xs[0].dtype
    for x in xs[1:] if dtype is None else ():
        common = _dt.promote(common, x.dtype)
    terms = [diagonal(x.cast(common), s) for x, s in zip(xs, inputs, strict=True)]
    sizes = _sizes(terms, formula)
    result = terms[0]
    for i, term in enumerate(terms[1:], 1):
        later = set(output).union(*(labels for _, labels in terms[i + 1:]))
        result = contract(result, term, later, sizes)
    x, labels = sum_labels(result, set(result[1]) - set(output))
    x = x if labels == output else P.transpose(x, [labels.index(c) for c in output])
    return x if x.shape == tuple(sizes[c] for c in output) else x.expand(
        tuple(sizes[c] for c in output))
