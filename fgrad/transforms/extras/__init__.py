"""JAX's smaller top-level functions: `linear_transpose` and `closure_convert` (linear.py),
`pure_callback` (callback.py), `named_scope` and `ensure_compile_time_eval` (contexts.py),
`device_get`, `local_devices` and `default_backend` (devices.py)."""
