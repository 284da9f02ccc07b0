"""Kernel IR rendered to LLVM IR: the renderer (`render`), the elementwise and reduction
ops (`ops`) and the vectorizable transcendentals (`vmath`)."""
