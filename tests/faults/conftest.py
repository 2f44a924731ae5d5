"""The fault matrix runs pytest in this process (``pytester.runpytest_inprocess``), and pytester takes
every module such a run imported out of ``sys.modules`` when it ends. A later test of the same worker
would then import a second copy of the package's modules (registries, the HTTP client's state) and
of C extensions that cannot load twice (numpy, matplotlib's pybind11 ones). So every module an
in-process run may import is imported here, when the matrix is collected, before any test runs:
modules that were there before a run are left in place by it."""

from __future__ import annotations

import importlib
import pkgutil

import pytest_novelty

for _module in pkgutil.walk_packages(pytest_novelty.__path__, "pytest_novelty."):
    # not the Trainer callback, a subclass of transformers' (it imports torch); no in-process run loads it
    if not _module.name.endswith("__main__") and not _module.name.startswith("pytest_novelty.integrations.trainer"):
        importlib.import_module(_module.name)
# anyio loads its event-loop backend, its abstract classes and its streams on first use: a second copy
# of them has other typed-attribute keys, and httpcore then reads every idle connection as closed by
# the server (it asks the stream for its socket and gets none), so no connection was reused.
_OTHERS = """httpx anyio anyio.abc anyio._backends._asyncio anyio.streams.tls anyio.streams.memory anyio.streams.stapled
encodings.idna httpcore openai matplotlib.pyplot contourpy zstandard numpy syrupy tqdm"""
for _name in _OTHERS.split():
    importlib.import_module(_name)
