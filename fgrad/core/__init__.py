"""fgrad's core: dtypes, the jaxpr IR, primitives and their rules, traces, Tensor, pytrees."""
