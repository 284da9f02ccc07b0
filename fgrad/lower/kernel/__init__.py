"""Stage 2 of lowering: kernel IR, built from a schedule (backend-neutral).

- `ir.py`: loop nests, loads, ALU ops, accumulators, stores, and `check_kernel`, which
  proves every access is inside its buffer.
- `index.py`: index expressions (`Ix`) with symbolic ranges; `Dyn` for run-time indices.
- `build.py` (+ `build_rows.py`, `build_scatter.py`): a kernel step as a `Kernel`.
- `signs.py`, `loop_shape.py`: what an expression's or loop's form says to the renderer
  (signs known without running, the shift of a softmax; latency-bound loops, nest sizes).
- `program.py`: kernels grouped into native segments with a buffer plan; `memory.py`
  reports one call's peak memory. Every backend executes a `Program`; only rendering differs.
"""
