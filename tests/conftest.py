"""Backend parametrization of the test suite.

A test (or a whole module, through `pytestmark`) marked `@pytest.mark.backends` runs once per
jit backend: "numpy" (the reference interpreter), "llvm", and "opencl" when pyopencl finds
a device that builds kernels (CI sets FGRAD_REQUIRE_OPENCL=1, so there it always runs).
The `jit_backend` fixture holds the backend and sets FGRAD_BACKEND for the test, so every
`fgrad.jit(f)` inside it uses that backend. In a marked module, only tests whose source
mentions `jit` are parametrized (the others never compile anything). Restrict with
`--backends=llvm,opencl` or the FGRAD_TEST_BACKENDS environment variable.
"""
from __future__ import annotations

import inspect
from collections.abc import Iterator
import os

import pytest


def _opencl_problem() -> str | None:
    """None when an OpenCL device builds kernels here, else why not."""
    try:
        from fgrad.lower.opencl import device as opencl_device
        opencl_device.default_index()
        return None
    except Exception as err:
        return str(err).splitlines()[0]


OPENCL_PROBLEM = _opencl_problem()


def pytest_report_header(config: pytest.Config) -> str:
    return "fgrad jit backends under test: " + ", ".join(selected_backends(config)) + (
        f" (opencl left out: {OPENCL_PROBLEM})" if OPENCL_PROBLEM else "")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--backends", default=os.environ.get("FGRAD_TEST_BACKENDS", ""),
                     help="comma-separated jit backends for tests marked 'backends'")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "backends: run the test once per jit backend")
    config.addinivalue_line("markers", "opencl: needs an OpenCL device that builds kernels")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests marked `opencl` when no device works, unless FGRAD_REQUIRE_OPENCL=1 (CI),
    where that is an error instead."""
    marked = [item for item in items if item.get_closest_marker("opencl")]
    if OPENCL_PROBLEM is None or not marked:
        return
    if os.environ.get("FGRAD_REQUIRE_OPENCL") == "1":
        raise pytest.UsageError(f"FGRAD_REQUIRE_OPENCL=1 but no OpenCL device works: "
                                f"{OPENCL_PROBLEM}")
    skip = pytest.mark.skip(reason=f"no working OpenCL device: {OPENCL_PROBLEM}")
    for item in marked:
        item.add_marker(skip)


def selected_backends(config: pytest.Config) -> list[str]:
    """The backends to parametrize over: the option's list, else every available one."""
    chosen = [b.strip() for b in config.getoption("--backends").split(",") if b.strip()]
    if chosen:
        return chosen
    if OPENCL_PROBLEM and os.environ.get("FGRAD_REQUIRE_OPENCL") == "1":
        raise pytest.UsageError(f"FGRAD_REQUIRE_OPENCL=1 but no OpenCL device works: "
                                f"{OPENCL_PROBLEM}")
    return ["numpy", "llvm"] + ([] if OPENCL_PROBLEM else ["opencl"])


def _mentions_jit(fn: object) -> bool:
    try:
        return "jit" in inspect.getsource(fn)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return True


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("backends")
    if marker is None or "jit_backend" not in metafunc.fixturenames:
        return
    own = any(m.name == "backends" for m in getattr(metafunc.function, "pytestmark", []))
    if not own and not _mentions_jit(metafunc.function):
        return
    backends = selected_backends(metafunc.config)
    metafunc.parametrize("jit_backend", backends, indirect=True,
                         ids=[f"backend={b}" for b in backends])


@pytest.fixture(autouse=True)
def jit_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
                ) -> Iterator[str | None]:
    """The jit backend of a parametrized test (None elsewhere: the default backend)."""
    from fgrad import flags
    backend = getattr(request, "param", None)
    if backend is not None:
        monkeypatch.setenv("FGRAD_BACKEND", backend)
        flags.refresh()
    yield backend
    if backend is not None:
        flags.refresh()   # the environment is restored next


@pytest.fixture
def run_op(jit_backend: str | None):
    """`run_op(fn, *args)`: `fn(*args)` eagerly for the numpy backend (or unparametrized
    tests), else under `fgrad.jit` with the test's backend; non-Tensor arguments are
    closed over (static), Tensor arguments are traced."""
    import fgrad

    def run(fn, *args):  # type: ignore[no-untyped-def]
        if jit_backend in (None, "numpy"):
            return fn(*args)
        where = [i for i, a in enumerate(args) if isinstance(a, fgrad.Tensor)]

        def with_tensors(*tensors):  # type: ignore[no-untyped-def]
            full = list(args)
            for i, t in zip(where, tensors, strict=True):
                full[i] = t
            return fn(*full)
        return fgrad.jit(with_tensors)(*[args[i] for i in where])
    return run
