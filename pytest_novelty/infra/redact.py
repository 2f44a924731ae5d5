"""One redaction function for everything pytest-novelty shows or writes.

Messages, log lines, reports, snapshots and JUnit properties pass through :func:`redact` (or
:func:`redact_data`) before they leave the process. It removes URLs' user info, the values of
secret-named query parameters wherever a ``name=value`` pair appears (an error body that echoes the
request path too), ``Authorization``/``api-key`` header values and any lone ``Bearer TOKEN``,
key-shaped strings (``sk-...``), and every value registered with :func:`register_secret` or held
by ``OPENAI_API_KEY``. The registry is process-wide on purpose: a secret seen once is hidden by
every writer, even those that never see the component holding it.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

__all__ = ["MASK", "Secret", "echo", "redact", "redact_data", "register_secret", "scrub", "secrets_in_url"]

MASK = "***"
SECRET_ENV = ("OPENAI_API_KEY",)
"""Environment variables whose values are secrets wherever they appear."""
_SECRET_NAMES = (
    r"api[_-]?key|apikey|key|access[_-]?token|refresh[_-]?token|id[_-]?token|token|auth|authorization|"
    r"password|passwd|pwd|secret|client[_-]?secret|sig|signature|x-amz-signature|x-goog-signature|code"
)
_QUERY_PAIR = re.compile(rf"(?i)([?&;](?:{_SECRET_NAMES})=)([^&#\s'\"<>]+)")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@'\"<>]+@")
_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization|api-key|x-api-key|openai-api-key)(['\"]?\s*[:=]\s*['\"]?)"
    r"(?:(bearer|basic|token)\s+)?([^\s'\",}]+)"
)
_BEARER = re.compile(r"(?i)\b(bearer)\s+([A-Za-z0-9_\-.~+/=]{6,})")
_KEY_LIKE = re.compile(
    r"\b(?:(?:sk|key|token)-[A-Za-z0-9_\-*.]{6,}|(?:sk|pk|rk|hf|ghp|gho|xox[abp])[-_][A-Za-z0-9_-]{12,})",
    re.IGNORECASE,
)
_MIN_SECRET = 4
"""Shorter values are not registered (masking every ``ab`` would garble messages)."""

_secrets: set[str] = set()
_lock = threading.Lock()


def register_secret(value: str | None) -> None:
    """Hide ``value`` in everything :func:`redact` cleans from now on, for the life of the process."""
    if value and len(value) >= _MIN_SECRET:
        with _lock:
            _secrets.add(value)


def secrets_in_url(url: str) -> list[str]:
    """The secret parts of ``url``: its user info (user and password) and secret-named query values."""
    parts = urlsplit(url)
    found: list[str] = []
    if "@" in parts.netloc:
        userinfo = parts.netloc.rpartition("@")[0]
        found.extend(unquote(p) for p in userinfo.split(":", 1) if p)
    names = re.compile(rf"(?i)^(?:{_SECRET_NAMES})$")
    found.extend(value for name, value in parse_qsl(parts.query, keep_blank_values=False) if names.match(name))
    return found


def redact(text: str) -> str:
    """``text`` with every secret it holds replaced by ``***`` (see the module doc)."""
    if not text:
        return text
    with _lock:
        known = list(_secrets)
    known += [v for v in (os.environ.get(name, "") for name in SECRET_ENV) if len(v) >= _MIN_SECRET]
    text = _mask_spans(text, known)
    text = _USERINFO.sub(lambda m: m.group(1), text)
    text = _QUERY_PAIR.sub(lambda m: m.group(1) + MASK, text)
    text = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3) + ' ' if m.group(3) else ''}{MASK}", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    return text


def _mask_spans(text: str, known: list[str]) -> str:
    """``text`` with every known secret (as it is, or URL-quoted) and key-shaped string masked, their
    spans found on the text as it came and merged, so a secret inside a longer key (or the other way
    round) leaves no piece of either behind."""
    spans = [m.span() for m in _KEY_LIKE.finditer(text)]
    for value in {*known, *(quote(v, safe="") for v in known)}:
        start = text.find(value)
        while start >= 0:
            spans.append((start, start + len(value)))
            start = text.find(value, start + 1)
    if not spans:
        return text
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    pieces, last = [], 0
    for start, end in merged:
        pieces += [text[last:start], MASK]
        last = end
    return "".join([*pieces, text[last:]])


def redact_data(value: Any) -> Any:
    """A JSON-like value (dicts, lists, tuples, strings) with every string :func:`redact`-ed."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_data(k) if isinstance(k, str) else k: redact_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_data(v) for v in value)
    return value


class Secret:
    """Holds an API key so that reprs, ``vars()`` and debug dumps show ``***``, never the key."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The key itself, for the one place that sends it."""
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __repr__(self) -> str:
        return "***" if self._value else "''"

    def hide(self, text: str) -> str:
        """``text`` with this secret, and anything else that looks like one, replaced by ``***``."""
        return scrub(text, self)


def scrub(text: str, *secrets: Secret | str) -> str:
    """``text`` with each secret, and anything :func:`redact` recognises as one, replaced by ``***``:
    what every client does to a server's message before showing it."""
    for secret in secrets:
        value = secret.reveal() if isinstance(secret, Secret) else secret
        if value:
            text = text.replace(value, MASK)
    return redact(text)


ECHO_LIMIT = 200
"""How many characters of a server's reply a message quotes."""


def echo(reply: str | bytes, *secrets: Secret | str, limit: int = ECHO_LIMIT) -> str:
    """``reply`` (any text a server sent) as a message may quote it to a terminal: bytes read as UTF-8
    (others as ``\\xNN``), scrubbed (before the cut, so no part of a key survives it), white space
    folded, every character left that is not printable (U+FFFD too) written as its Python escape, so
    a server can neither garble the terminal nor hide in it; cut to ``limit`` characters.
    """
    text = bytes(reply).decode("utf-8", "backslashreplace") if isinstance(reply, (bytes, bytearray)) else str(reply)
    text = " ".join(scrub(text, *secrets).split())
    shown = "".join(c if c.isprintable() and c != "\ufffd" else c.encode("unicode_escape").decode() for c in text)
    return shown if len(shown) <= limit else shown[: max(0, limit - 3)] + "..."
