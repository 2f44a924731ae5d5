"""Hub ids pinned to commits: which revision of ``org/name`` a run loads, online or from the local cache.

Whether the hub can be reached is decided within seconds (``HF_HUB_OFFLINE``, then one TCP
connection); offline, a branch or tag is read from the local cache's ``refs/`` and one line says
that cached answers are used on trust.
"""

from __future__ import annotations

import functools
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from pytest_novelty.infra.errors import ConfigError, HarnessError, first_line
from pytest_novelty.infra.progress import notice

__all__ = ["HubRevision", "hub_reachable", "looks_like_hub_id", "resolve_hub", "split_revision"]

HUB_TIMEOUT = 3.0  # seconds to wait for a TCP connection to the hub before working offline
_SHA = re.compile(r"^[0-9a-f]{40}$")


def split_revision(model: str) -> tuple[str, str | None]:
    """``org/name@revision`` -> (``org/name``, ``revision``); without ``@``, the revision is None."""
    name, sep, revision = model.partition("@")
    return name, (revision or None) if sep else None


def looks_like_hub_id(model: str) -> bool:
    """Whether ``model`` reads as ``org/name`` or ``org/name@revision`` (and not as a path)."""
    name, revision = split_revision(model)
    parts = name.split("/")
    return (
        len(parts) == 2
        and all(parts)
        and not name.startswith((".", "/", "~"))
        and all(c.isalnum() or c in "-_." for c in name.replace("/", ""))
        and (revision is None or bool(re.fullmatch(r"[\w.\-/]+", revision)))
    )


def _offline_by_setting() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def hub_reachable(timeout: float = HUB_TIMEOUT) -> bool:
    """False when ``HF_HUB_OFFLINE`` is set or no TCP connection to the hub (or the proxy) opens in time."""
    if _offline_by_setting():
        return False
    from huggingface_hub import constants

    proxy = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")
    url = urlparse(proxy if proxy else constants.ENDPOINT)
    host = url.hostname
    port = url.port or (443 if url.scheme == "https" else 80)
    return bool(host) and _connects(str(host), port, timeout)


@functools.lru_cache(maxsize=8)
def _connects(host: str, port: int, timeout: float) -> bool:
    """Whether a TCP connection opens (asked once per process: the answer holds for a run)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _hub_cache() -> Path:
    """The Hugging Face hub cache folder, read from the environment now (as huggingface_hub would)."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.environ[var]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


@dataclass(frozen=True)
class HubRevision:
    """A hub model pinned to a commit: ``snapshot`` is its complete local copy, when there is one."""

    repo: str
    revision: str
    sha: str
    snapshot: Path | None
    trusted: bool  # a moving revision (a branch or tag) read from the local cache without asking the hub
    offline: bool  # the hub was not reachable: load ``snapshot`` itself


def _cached_snapshot(repo: str, revision: str) -> tuple[str | None, Path | None]:
    """(commit sha, snapshot folder) of ``repo`` at ``revision`` in the local cache, when known."""
    folder = _hub_cache() / ("models--" + repo.replace("/", "--"))
    sha = revision if _SHA.match(revision) else None
    if sha is None:
        try:
            sha = (folder / "refs" / revision).read_text(encoding="utf-8").strip() or None
        except OSError:
            return None, None
    snapshot = folder / "snapshots" / str(sha)
    complete = any((snapshot / name).is_file() for name in ("config.json", "adapter_config.json"))
    return sha, (snapshot if complete else None)


def _download_hint(repo: str, revision: str | None) -> str:
    pin = f" --revision {revision}" if revision else ""
    return f"pre-download it with `huggingface-cli download {repo}{pin}`, or pass a local checkpoint folder"


@functools.lru_cache(maxsize=64)
def _resolve(repo: str, revision: str | None, cache: str, offline: bool) -> HubRevision:
    wanted = revision or "main"
    why = "HF_HUB_OFFLINE is set" if _offline_by_setting() else "the hub cannot be reached"
    if _SHA.match(wanted):  # pinned: nothing to ask
        _, snapshot = _cached_snapshot(repo, wanted)
        if offline and snapshot is None:
            raise ConfigError(
                f"{why} and commit {wanted[:8]} is not in the local cache ({cache}); " + _download_hint(repo, wanted),
                path=f"{repo}@{wanted}", field="--model",
            )
        return HubRevision(repo, wanted, wanted, snapshot, trusted=False, offline=offline)
    answered = False  # the hub answered, with a server error: not bad input when nothing is cached
    if not offline:
        sha, trouble = _ask_hub(repo, wanted)
        if sha is not None:
            return HubRevision(repo, wanted, sha, _cached_snapshot(repo, sha)[1], trusted=False, offline=False)
        why, answered = trouble, trouble.startswith("the hub answered")
    sha, snapshot = _cached_snapshot(repo, wanted)
    if sha is None or snapshot is None:
        message = f"{why} and revision {wanted!r} is not in the local Hugging Face cache ({cache}); "
        if answered:
            raise HarnessError(f"{repo}: {message}try again later, or " + _download_hint(repo, revision))
        raise ConfigError(message + _download_hint(repo, revision), path=repo, field="--model")
    notice(
        f"[novelty] {repo}: hub not checked ({'offline' if not answered else why}); using cached revision {wanted} "
        f"= {sha[:8]}; cached answers are used on trust (pin {repo}@{sha} to make that explicit)"
    )
    return HubRevision(repo, wanted, sha, snapshot, trusted=True, offline=True)


def _ask_hub(repo: str, revision: str) -> tuple[str | None, str]:
    """The commit sha of ``repo`` at ``revision`` from the hub, or (None, why) when it gave none.

    Only trouble that says nothing about the model (no connection or answer in time, a 5xx, a 429)
    lets the caller fall back to the local cache. An answer about the model (no such repository or
    revision, gated, a refused token) is bad input; anything else is a harness error, never "offline".
    """
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    try:
        info = HfApi().model_info(repo, revision=revision, timeout=10)
    except RevisionNotFoundError:
        raise ConfigError(f"the hub has no revision {revision!r} of this model", path=repo, field="--model") from None
    except GatedRepoError:
        raise ConfigError(
            "a gated model: accept its conditions on the hub, then log in with `huggingface-cli login` or set HF_TOKEN",
            path=repo, field="--model",
        ) from None
    except RepositoryNotFoundError:
        raise ConfigError(
            "no such model on the hub (or it is private: log in with `huggingface-cli login` or set HF_TOKEN)",
            path=repo, field="--model",
        ) from None
    except HfHubHTTPError as exc:
        status = getattr(exc.response, "status_code", None)
        if status is not None and (status >= 500 or status == 429):
            return None, f"the hub answered HTTP {status}"
        if status in (401, 403):
            raise ConfigError(
                f"the hub refused the request (HTTP {status}): check HF_TOKEN, or log in with `huggingface-cli login`",
                path=repo, field="--model",
            ) from None
        raise HarnessError(f"{repo}: the hub answered HTTP {status}: {first_line(exc)}") from None
    except Exception as exc:
        if _network_trouble(exc):
            return None, "the hub cannot be reached"
        raise HarnessError(
            f"{repo}: asking the hub for revision {revision!r} failed: {type(exc).__name__}: {first_line(exc)}"
        ) from None
    if not info.sha:
        raise HarnessError(f"{repo}: the hub's answer for revision {revision!r} names no commit")
    return str(info.sha), ""


def _network_trouble(exc: BaseException) -> bool:
    """Whether ``exc`` is a connection or a timeout failing (httpx's or a socket's), not an answer."""
    import httpx

    return isinstance(exc, (httpx.TransportError, OSError))


def resolve_hub(model: str) -> HubRevision:
    """Pin a hub id (``org/name`` or ``org/name@revision``) to its commit sha, within seconds: the hub's
    answer, or offline the local cache's (said once per process). A model neither reachable nor cached
    is a :class:`ConfigError` that says how to pre-download it."""
    repo, revision = split_revision(model)
    return _resolve(repo, revision, str(_hub_cache()), not hub_reachable())

