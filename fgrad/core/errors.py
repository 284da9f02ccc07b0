"""Exception classes of the Tensor API.

Each derives from the Python class that describes the mistake (ValueError, TypeError,
IndexError) and from RuntimeError, the class PyTorch raises for the same mistakes, so code
written against either contract catches fgrad's errors (as NumPy's AxisError derives from
both ValueError and IndexError).
"""
from __future__ import annotations


class ArgumentError(ValueError, RuntimeError):
    """A Tensor operation got arguments or shapes it cannot work with."""


class ArgumentTypeError(TypeError, RuntimeError):
    """A Tensor operation got an argument of the wrong kind or dtype."""


class IndexRangeError(IndexError, RuntimeError):
    """An index or axis is out of range for the Tensor it addresses."""


class AxisError(IndexRangeError, ArgumentError):
    """An axis argument that does not exist: an IndexError and a ValueError (as NumPy's
    AxisError), and a RuntimeError."""


__all__ = ["ArgumentError", "ArgumentTypeError", "AxisError", "IndexRangeError"]
