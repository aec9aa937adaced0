"""Shared test helpers, and the environment every test runs in."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

# The CLI's consoles are 150 columns wide when output is not a terminal and COLUMNS is unset
# (ladder/cli/app.py); tests that read its tables and messages assume that width. pytest-xdist's
# workers start with COLUMNS=80, so clear it here (before ladder.cli is imported) to give the same
# width with and without `-n`.
os.environ.pop("COLUMNS", None)

_XLA_CACHE_ENV = "JAX_COMPILATION_CACHE_DIR"


def pytest_configure(config):
    """One persistent XLA compilation cache for the whole run: identical programs (the same tiny
    model in many tests, in this process, in trainer subprocesses and in every xdist worker, which
    inherit the environment) compile once. A user's own cache directory is left as it is."""
    if _XLA_CACHE_ENV in os.environ:
        return
    config._ladder_xla_cache = tempfile.mkdtemp(prefix="ladder-tests-xla-cache-")
    os.environ[_XLA_CACHE_ENV] = config._ladder_xla_cache
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")


def pytest_unconfigure(config):
    folder = getattr(config, "_ladder_xla_cache", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(_XLA_CACHE_ENV, None)


def pytest_collection_modifyitems(config, items):
    """Modules with a test marked slow first (each module keeps its own order): under xdist
    (`--dist loadscope`) each module is one unit of work, handed out in this order, so the longest
    ones start at once instead of last."""
    module = lambda item: item.nodeid.split("::")[0]  # noqa: E731
    slow = {module(item) for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: module(item) not in slow)  # stable: the order within stays


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"../shared/data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture
def crash_at_manifest(monkeypatch):
    """Kills the store's writes just before `manifest.json` is replaced, from `.arm()` to `.disarm()`."""
    import ladder.data.storefiles as store_files

    real = store_files.write_text_atomic

    def crash(path, text):
        if str(path).endswith("manifest.json"):
            raise KeyboardInterrupt  # killed just before the manifest is replaced
        return real(path, text)

    class Switch:
        @staticmethod
        def arm() -> None:
            monkeypatch.setattr(store_files, "write_text_atomic", crash)

        @staticmethod
        def disarm() -> None:
            monkeypatch.setattr(store_files, "write_text_atomic", real)

    return Switch
