"""The `opencl` backend: a Program rendered to OpenCL C and run through pyopencl.

- `render.py` (+ `render_rows.py`), `ops.py`: kernel IR to OpenCL C; `gemm.py`: tiled matmul.
- `device.py`: device selection and contexts; `runtime.py`: `CLArray`, building and running
  programs, eager primitives on device data.
Importing this package needs pyopencl (`pip install 'fgrad[opencl]'`).
"""
