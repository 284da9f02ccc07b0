"""Stage 1 of lowering: rewrite a jaxpr and partition it into steps (backend-neutral).

- `expand.py` (+ `expand_math.py`, `expand_dot.py`): primitives without kernels of their
  own (argmax, cumulative ops, sort, nested calls, non-BLAS dot_general) rewritten into
  primitives that have them.
- `partition.py`: the `Schedule`: fused kernel steps, gemm/linalg library calls, control-flow
  steps and host steps; `row_fusion.py` finds softmax/layernorm-style rows.
- `gemm_layout.py`: a dot_general as a (batched) GEMM with transposes folded into strides.
- `control_flow.py`: scan/while/cond steps whose bodies compile for the same backend.
"""
