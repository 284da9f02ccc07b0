"""JAX's smaller top-level functions: `linear_transpose` and `closure_convert` (linear.py),
`pure_callback` (callback.py), `named_scope` and `ensure_compile_time_eval` (contexts.py),
`device_get`, `local_devices` and `default_backend` (devices.py), `custom_gradient`, `typeof`,
`named_call`, the device and process counts and `print_environment_info` (toplevel.py), and the
config states `enable_x64`, `log_compiles`, `default_device`, `check_tracer_leaks` and
`transfer_guard` (states.py), and JAX's sharding API on one device (sharding.py,
shard_map.py)."""
