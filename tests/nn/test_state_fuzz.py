"""Bounded fuzzing of the checkpoint readers in a subprocess (crashes and hangs fail the
test). A few seconds per format by default; FGRAD_FUZZ_SECONDS=600 (and FGRAD_FUZZ_SEED)
for a long run."""
import json
import os
import pathlib

import pytest

from subprocess_probe import run_probe

SECONDS = float(os.environ.get("FGRAD_FUZZ_SECONDS", "3"))
SEED = int(os.environ.get("FGRAD_FUZZ_SEED", "18"))
SCRIPT = pathlib.Path(__file__).parent / "state_fuzz.py"


@pytest.mark.parametrize("fmt", ["safetensors", "gguf", "torch"])
def test_fuzzed_files_load_or_raise_state_file_error(fmt):
    code = (f"import runpy, sys; sys.argv = ['state_fuzz', {fmt!r}, '{SECONDS}', '{SEED}']; "
            f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')")
    out = run_probe(code, timeout=SECONDS * 4 + 120)
    counts = json.loads(out.strip().splitlines()[-1])
    print(fmt, counts)
    assert counts["tried"] > 0
    assert counts["escaped"] == 0 and counts["damaged"] == 0, counts["problems"]
