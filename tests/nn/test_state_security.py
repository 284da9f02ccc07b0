"""Hostile checkpoints: a file may fail to load, but never changes fgrad's own objects,
reads another entry's bytes, or escapes `StateFileError` (issue 18, items 1, 8, 11, 12)."""
import collections
import io
import pickle
import struct
import zipfile
import zlib

import numpy as np
import pytest

from fgrad import dtypes
from fgrad.nn import state
from fgrad.nn.state import StateFileError, UnsafePickleError
from subprocess_probe import run_probe


def torch_zip(pkl: bytes, storages: dict | None = None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("archive/data.pkl", pkl)
        for key, data in (storages or {}).items():
            archive.writestr(f"archive/data/{key}", data)
    return out.getvalue()


# --------------------------------------------------------------------------- item 1: BUILD

DTYPE_REWRITE = b"ctorch\nfloat32\n}(X\x08\x00\x00\x00itemsizeK\x08ub."
DEFAULTS_REWRITE = b"c_codecs\nencode\n(N}X\x0c\x00\x00\x00__defaults__(X\x04\x00\x00\x00zlibtstb."
CLASS_REWRITE = b"ccollections\nOrderedDict\n}X\x04\x00\x00\x00evilK\x01sb."


@pytest.mark.parametrize("payload", [DTYPE_REWRITE, DEFAULTS_REWRITE, CLASS_REWRITE],
                         ids=["dtype-itemsize", "function-defaults", "class-attribute"])
def test_build_on_allow_listed_globals_is_refused(payload):
    with pytest.raises(UnsafePickleError, match="BUILD"):
        state.torch_load(torch_zip(payload))
    assert dtypes.float32.itemsize == 4
    assert not hasattr(collections.OrderedDict, "evil")
    ok = b"\x80\x02c_codecs\nencode\nX\x02\x00\x00\x00abX\x06\x00\x00\x00latin1\x86R."
    assert state.torch_load(torch_zip(ok)) == b"ab"


def test_dtype_rewrite_cannot_break_a_later_jit():
    """The issue's 40-byte probe, then a jitted float32 program, in a fresh process."""
    out = run_probe(f"""
        import io, zipfile, numpy as np, fgrad
        from fgrad import Tensor, dtypes
        from fgrad.nn import state
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("archive/data.pkl", {DTYPE_REWRITE!r})
        try:
            state.torch_load(buf.getvalue())
        except state.UnsafePickleError:
            pass
        x = np.arange(4096, dtype=np.float32)
        y = fgrad.jit(lambda a: a * 2 + 1)(Tensor(x)).numpy()
        print(dtypes.float32.itemsize, bool(np.array_equal(y, x * 2 + 1)))
    """)
    assert out.split() == ["4", "True"]


def test_ordered_dict_metadata_still_loads():
    od = collections.OrderedDict(a=1)
    od._metadata = {"": {"version": 1}}
    loaded = state.torch_load(torch_zip(pickle.dumps(od, protocol=2)))
    assert type(loaded) is collections.OrderedDict and loaded["a"] == 1
    assert loaded._metadata == {"": {"version": 1}}
