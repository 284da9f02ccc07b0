"""fgrad's own GEMM for the llvm backend.

- `native.py`: the shared routines (micro-kernel, packing), the tile for the host's vector
  width, which products it computes and which kernels run inside it as epilogues.
- `driver.py`: the block loops around them (one shared driver per dtype) and the small
  wrapper each call site compiles.
- `prepack.py`: a split product whose B all threads pack once before the row chunks.
- `scratch.py`: how a routine whose allocation fails tells Python (MemoryError).
"""
