"""Abilities a backend of any kind may have beyond its kind's Protocol (``Judge``,
``OriginalityBackend``, ``Generator``, ``Equivalence``), each a small runtime-checkable Protocol
that the pipeline asks with ``isinstance``.

A backend has an ability by defining its members (no base class, no flag). Abilities of one kind
only (a judge's planned calls, a generator's identity) live beside that kind's Protocol.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["CountsRequests", "Described", "Preflighted", "description_of"]


@runtime_checkable
class Preflighted(Protocol):
    """A backend that reaches something outside the run (the ``openai:`` judges, a served model, the
    infini-gram web APIs) and can check it cheaply before any work."""

    def check(self) -> None:
        """Make sure, within seconds, that the run's requests can be answered; raise a one-line
        :class:`~pytest_novelty.infra.errors.PreflightError` (or a ``ConfigError`` for a wrong name)
        otherwise."""
        ...


@runtime_checkable
class Described(Protocol):
    """A backend that says what it is in words (the report shows this instead of its spec)."""

    description: str


@runtime_checkable
class CountsRequests(Protocol):
    """A backend that counts the HTTP requests it sends, every attempt (the report's work line)."""

    @property
    def requests_sent(self) -> int:
        """Requests sent over the backend's life."""
        ...


def description_of(backend: object, spec: str) -> str:
    """``backend`` in words: its :class:`Described` description, else ``spec``."""
    return str(backend.description) if isinstance(backend, Described) else spec
