"""The GEMM routines' text shipped with the package (fgrad/lower/llvm/gemm/prerendered.py):
current with the code, used when it matches, ignored when it does not."""
from __future__ import annotations

import gzip
import json

import llvmlite.binding as llvm
import pytest

from fgrad.lower.llvm import target
from fgrad.lower.llvm.gemm import driver, prerendered


@pytest.fixture
def fresh_caches():
    """routine_text and the bundles loaded anew (and again after the test)."""
    driver.routine_text.cache_clear()
    prerendered._bundle.cache_clear()
    yield
    driver.routine_text.cache_clear()
    prerendered._bundle.cache_clear()


def _stored(dtype_name: str, bits: int) -> dict:
    with gzip.open(prerendered.bundle_path(dtype_name, bits), "rt", encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.parametrize("dtype_name,bits", prerendered.SHIPPED)
def test_each_shipped_bundle_is_what_the_code_renders_now(dtype_name, bits):
    stored = _stored(dtype_name, bits)
    if stored["key"]["triple"] != target.triple_and_layout()[0]:
        pytest.skip("bundles are rendered for x86-64 Linux; this host renders its own")
    fresh = prerendered.render_bundle(dtype_name, bits, driver.render_routine_text)
    assert stored == fresh, f"stale GEMM routine bundle: run {prerendered.REWRITE}"


@pytest.mark.parametrize("dtype_name,bits", prerendered.SHIPPED)
def test_shipped_texts_are_valid_modules_with_the_widths_they_claim(dtype_name, bits):
    texts = _stored(dtype_name, bits)["texts"]
    assert set(texts) == set(driver.ROUTINE_PARTS)
    lanes = bits // (32 if dtype_name == "float32" else 64)
    scalar = "float" if dtype_name == "float32" else "double"
    assert f"<{lanes} x {scalar}>" in texts["micro"]
    assert f"<{2 * lanes} x {scalar}>" not in texts["micro"]
    for text in texts.values():
        llvm.parse_assembly(text, context=llvm.create_context()).verify()


def test_routine_text_takes_the_shipped_text_without_rendering(fresh_caches, monkeypatch):
    if prerendered.shipped_text("float32", "micro") is None:
        pytest.skip("no bundle matches this host (not x86-64 Linux, or no AVX)")
    rendered = []
    monkeypatch.setattr(driver, "render_routine_text", lambda *a: rendered.append(a) or "")
    for part in driver.ROUTINE_PARTS:
        assert driver.routine_text("float32", part) == prerendered.shipped_text("float32", part)
    assert rendered == []


def test_a_bundle_of_other_code_is_ignored(fresh_caches, monkeypatch):
    monkeypatch.setattr(prerendered, "source_digest", lambda: "other code")
    assert prerendered.shipped_text("float32", "micro") is None
    assert driver.routine_text("float32", "pack_a") == driver.render_routine_text("float32",
                                                                                  "pack_a")


@pytest.mark.parametrize("content", [b"", b"not gzip", b"[1, 2]", b'{"key": 1}', b"{\xff"],
                         ids=["empty", "not-gzip", "a-list", "no-texts", "not-utf8"])
def test_a_damaged_bundle_is_ignored(fresh_caches, monkeypatch, tmp_path, content):
    bits = target.vector_bits()
    packed = content if content in (b"", b"not gzip") else gzip.compress(content, mtime=0)
    (tmp_path / f"float32-{bits}.json.gz").write_bytes(packed)
    monkeypatch.setattr(prerendered, "FOLDER", str(tmp_path))
    assert prerendered.shipped_text("float32", "micro") is None


# ----------------------------------------------------------------- the shipped objects


def _stored_objects(bits: int) -> dict:
    with gzip.open(prerendered.objects_path(bits), "rt", encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.parametrize("bits", sorted(prerendered.LEVELS))
def test_the_shipped_objects_were_built_from_the_texts_the_code_renders_now(bits):
    """Each routine part of every shipped (dtype, width) has an object in its level's
    file, under the digest of the text rendered now and its speed level, and nothing else
    is there (a stale file fails here)."""
    from fgrad.lower.llvm.runtime import routine_unit
    stored = _stored_objects(bits)
    if stored["key"]["triple"] != target.triple_and_layout()[0]:
        pytest.skip("objects are built for x86-64 Linux")
    assert stored["key"] == prerendered.objects_key(bits)
    want = set()
    for dtype_name, width in prerendered.SHIPPED:
        if width == bits:
            with target.rendering_for_width(bits):
                for part in driver.ROUTINE_PARTS:
                    text = driver.render_routine_text(dtype_name, part)
                    want.add(prerendered.object_digest(*routine_unit(part, text)))
    assert set(stored["objects"]) == want, f"stale GEMM objects: run {prerendered.REWRITE}"


def test_a_cold_product_takes_the_shipped_objects_and_computes_right(tmp_path, monkeypatch):
    """On a CPU of its width's level, a program's first product compiles none of the
    shared routines (they come from the objects file) and matches NumPy; with the objects
    file ignored they compile, with the same results."""
    import numpy as np

    import fgrad
    from fgrad import Tensor
    from fgrad.lower.llvm import kernel_cache
    bits = target.vector_bits()
    if not prerendered.host_runs(bits) or prerendered._objects(bits) is None:
        pytest.skip("no shipped objects for this CPU")
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(4)
    a = rng.standard_normal((131, 257)).astype(np.float64)
    b = rng.standard_normal((100, 257)).astype(np.float64)
    results = []
    for shipped in (True, False):
        kernel_cache.clear_memory()
        if not shipped:
            monkeypatch.setattr(prerendered, "_objects", lambda bits: None)
        before = kernel_cache.stats["shipped"]
        with fgrad.config.override(gemm="native"):
            out = fgrad.jit(lambda x, y: (x @ y.T).relu(), backend="llvm")(Tensor(a), Tensor(b))
        results.append(out.numpy())
        used = kernel_cache.stats["shipped"] - before
        assert used >= len(driver.routine_parts()) if shipped else used == 0
    np.testing.assert_allclose(results[0], np.maximum(a @ b.T, 0), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(results[0], results[1])


def test_objects_for_another_cpu_or_text_are_not_taken(monkeypatch):
    """A host lacking a feature of the level, and a text not in the file (one changed
    byte), compile as before."""
    bits = target.vector_bits()
    text = driver.routine_text("float32", "pack_a")
    from fgrad.lower.llvm.runtime import routine_unit
    _, level = routine_unit("pack_a", text)
    if prerendered.shipped_object(text, level) is None:
        pytest.skip("no shipped objects for this CPU")
    assert prerendered.shipped_object(text + " ", level) is None
    assert prerendered.shipped_object(text, None) is None
    prerendered._objects.cache_clear()
    monkeypatch.setattr(target, "features", lambda: "+avx,+avx2")
    try:
        assert prerendered.shipped_object(text, level) is None
    finally:
        prerendered._objects.cache_clear()
