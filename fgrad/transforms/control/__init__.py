"""Control flow as primitives holding sub-jaxprs: `cond`, `scan` (with `fori_loop` built on
it) and `while_loop`, with their JVP, partial-evaluation, transpose and batching rules
(`cf_util.py` holds what they share)."""
