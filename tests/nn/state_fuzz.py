"""Bounded mutation fuzzer for the three checkpoint readers (safetensors, GGUF, torch).

Each trial mutates a real fixture file (byte flips, truncation, spliced or duplicated
chunks, "interesting" integers written over length and offset fields, pickle opcodes
inserted into a torch pickle) and loads it. Allowed outcomes: it loads, or it raises
StateFileError. Anything else is counted: `escaped` (another exception type), `damaged`
(fgrad's own objects changed, e.g. a dtype's itemsize). Crashes and hangs are caught by
running this in a subprocess (`python tests/nn/state_fuzz.py FORMAT SECONDS SEED`), which
prints one JSON line of counts and the first few problems.
"""
from __future__ import annotations

import io
import json
import pathlib
import random
import sys
import time
import zipfile

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
SEEDS = {"safetensors": ["state_ref.safetensors"],
         "gguf": ["state_small.gguf", "state_align64.gguf"],
         "torch": ["state_torch_zip.pt", "state_torch_legacy.pt", "state_torch_param.pt"]}
INTERESTING = [0, 1, 2, 7, 8, 63, 64, 65, 255, 256, 2 ** 15, 2 ** 16 - 1, 2 ** 31 - 1, 2 ** 31,
               2 ** 32 - 1, 2 ** 32, 2 ** 53, 2 ** 62, 2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1]
PICKLE_OPS = [b"b", b"R", b"c__builtin__\neval\n", b"ctorch\nfloat32\n", b"}", b"(", b"t",
              b"\x81", b"\x92", b"s", b"u", b"a", b"e", b"0", b"2", b"h\x00", b"q\x00",
              b"Q", b"\x85", b"\x93", b"N", b"]"]


def _int_field(data: bytearray, rng: random.Random) -> None:
    size = rng.choice([2, 4, 8])
    pos = rng.randrange(0, max(1, len(data) - size))
    value = rng.choice(INTERESTING) % (1 << (8 * size))
    data[pos:pos + size] = value.to_bytes(size, "little")


def _pickle_op(data: bytearray, rng: random.Random) -> None:
    pos = rng.randrange(0, max(1, len(data)))
    data[pos:pos] = rng.choice(PICKLE_OPS)


def mutate(data: bytes, rng: random.Random, fmt: str) -> bytes:
    """One to four random mutations of `data`."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(6 if fmt == "torch" else 5)
        if kind == 0 and out:
            for _ in range(rng.randint(1, 8)):
                out[rng.randrange(len(out))] = rng.randrange(256)
        elif kind == 1:
            del out[rng.randrange(len(out) + 1):]
        elif kind == 2 and out:
            a = rng.randrange(len(out))
            b = min(len(out), a + rng.randint(1, 64))
            out[rng.randrange(len(out) + 1):0] = out[a:b]
        elif kind == 3 and out:
            _int_field(out, rng)
        elif kind == 4 and out:
            a = rng.randrange(len(out))
            del out[a:a + rng.randint(1, 32)]
        elif kind == 5:
            _torch_pickle_mutation(out, rng)
    return bytes(out)


def _torch_pickle_mutation(out: bytearray, rng: random.Random) -> None:
    """Mutate the pickle inside a torch zip (rebuilding the archive so it stays valid)."""
    try:
        with zipfile.ZipFile(io.BytesIO(bytes(out))) as z:
            entries = [(i.filename, z.read(i.filename)) for i in z.infolist()]
    except Exception:
        _pickle_op(out, rng)
        return
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, blob in entries:
            if name.endswith("data.pkl"):
                blob = bytearray(blob)
                _pickle_op(blob, rng)
            z.writestr(name, bytes(blob))
    out[:] = buf.getvalue()


def run(fmt: str, seconds: float, seed: int) -> dict:
    """Fuzz `fmt` for about `seconds`; return the counts."""
    from fgrad import dtypes
    from fgrad.nn import state
    loader = {"safetensors": state.safe_load, "gguf": state.gguf_load,
              "torch": state.torch_load}[fmt]
    seeds = [(FIXTURES / name).read_bytes() for name in SEEDS[fmt]]
    sizes = {name: getattr(dtypes, name).itemsize for name in ("float32", "int64", "uint8")}
    rng, counts, problems = random.Random(seed), dict.fromkeys(
        ("tried", "loaded", "clear_error", "escaped", "damaged"), 0), []
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        data = mutate(rng.choice(seeds), rng, fmt)
        counts["tried"] += 1
        try:
            loader(data)
            counts["loaded"] += 1
        except state.StateFileError:
            counts["clear_error"] += 1
        except Exception as err:  # noqa: BLE001  (what the fuzzer looks for)
            counts["escaped"] += 1
            problems.append(f"{type(err).__name__}: {str(err)[:200]}")
        if {n: getattr(dtypes, n).itemsize for n in sizes} != sizes:
            counts["damaged"] += 1
            problems.append("fgrad's dtypes were modified")
            break
    counts["problems"] = problems[:5]
    return counts


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]))))
