"""fgrad.example_libraries: jax.example_libraries' `optimizers` and `stax` over fgrad, so
programs written with them (JAX's own examples, many tutorials) run after their imports
change. They are small and functional on purpose; new code may prefer fgrad.optim and
fgrad.nn."""
