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
