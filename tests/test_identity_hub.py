"""Pinning a hub id against a real (fake) hub on 127.0.0.1: only a connection that fails or a server
error counts as "the hub cannot be checked"; every other answer is named for what it is."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_novelty.infra.errors import ConfigError, HarnessError
from tests.servers.hub_api import FakeHub

SHA = "0123456789abcdef0123456789abcdef01234567"
MODEL_INFO = "/api/models/"
"""The model-info requests (the hub client also asks other endpoints, which the fake answers 404)."""
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeHub]:
    """The fake hub as the hub endpoint, online, with an empty local hub cache."""
    from huggingface_hub import constants

    from pytest_novelty.infra import hub as hub_module

    with FakeHub({"main": SHA}) as server:
        monkeypatch.setattr(constants, "ENDPOINT", server.url)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        for name in PROXIES:
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-hub"))
        hub_module._resolve.cache_clear()
        yield server
        hub_module._resolve.cache_clear()


def cached(tmp_path: Path, sha: str = SHA) -> None:
    """``someorg/tiny`` at ``main`` in the local hub cache, as ``huggingface-cli download`` leaves it."""
    repo = tmp_path / "hf-hub" / "models--someorg--tiny"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(sha)
    (repo / "snapshots" / sha).mkdir(parents=True)
    (repo / "snapshots" / sha / "config.json").write_text("{}")


def resolve(model: str = "someorg/tiny") -> object:
    from pytest_novelty.infra.hub import resolve_hub

    return resolve_hub(model)


def test_an_answer_pins_the_commit(hub: FakeHub) -> None:
    pinned = resolve()
    assert getattr(pinned, "sha") == SHA and not getattr(pinned, "offline")  # noqa: B009
    assert any(r["path"].startswith("/api/models/someorg/tiny/revision/main") for r in hub.requests)


def test_a_refused_token_is_named_not_taken_for_offline(hub: FakeHub) -> None:
    hub.inject("status", status=401, message="Invalid credentials in Authorization header", times=-1, match=MODEL_INFO)
    with pytest.raises(ConfigError) as caught:
        resolve()
    message = str(caught.value)
    assert message.startswith("someorg/tiny: --model: the hub refused the request (HTTP 401): check HF_TOKEN")
    assert "cannot be reached" not in message


def test_a_server_error_uses_the_cached_revision_and_says_why(
    hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cached(tmp_path)
    hub.inject("status", status=503, message="Service Unavailable", times=-1, match=MODEL_INFO)
    pinned = resolve()
    assert getattr(pinned, "sha") == SHA and getattr(pinned, "trusted")  # noqa: B009
    err = capsys.readouterr().err
    assert "someorg/tiny: hub not checked (the hub answered HTTP 503); using cached revision main" in err


def test_a_server_error_with_nothing_cached_is_a_harness_error(hub: FakeHub) -> None:
    hub.inject("status", status=503, message="Service Unavailable", times=-1, match=MODEL_INFO)
    with pytest.raises(HarnessError, match=r"someorg/tiny: the hub answered HTTP 503 and revision 'main' is not in "
                                           r"the local Hugging Face cache .*try again later"):
        resolve()


def test_an_unreadable_answer_is_a_harness_error_not_offline(hub: FakeHub, tmp_path: Path) -> None:
    cached(tmp_path)  # the old code fell back to this, saying the hub was offline
    hub.inject("garbage", times=-1, match=MODEL_INFO)
    with pytest.raises(HarnessError) as caught:
        resolve()
    assert str(caught.value).startswith("someorg/tiny: asking the hub for revision 'main' failed: ")
    assert "offline" not in str(caught.value) and "cannot be reached" not in str(caught.value)


def test_nothing_listening_is_offline(hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cached(tmp_path)
    hub.stop()  # the port is closed: no connection opens
    from pytest_novelty.infra import hub as hub_module

    hub_module._connects.cache_clear()
    pinned = resolve()
    assert getattr(pinned, "trusted")  # noqa: B009
    assert "hub not checked (offline)" in capsys.readouterr().err
