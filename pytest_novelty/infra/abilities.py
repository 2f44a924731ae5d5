"""Abilities a backend of any kind may have beyond its kind's Protocol, each a small runtime-checkable
Protocol that the pipeline asks with ``isinstance``.

A kind's own Protocol (``Judge``, ``OriginalityBackend``, ``Generator``, ``Equivalence``) says what
every backend of that kind does. Some backends can do more: reach a server that may be down, say
what they are in words, count the requests they send. A backend has such an ability by having its
members (no base class to inherit, no flag to set), so a registered backend opts in by defining
them, and a reader of the pipeline finds here every ability it asks for:

- :class:`Preflighted`: ``check()``, one cheap look at what the backend reaches outside the run,
  made before any work, raising a :class:`~pytest_novelty.infra.errors.PreflightError` (one line)
  when the run could not finish (the ``openai:`` judges, a served model, the infini-gram web APIs);
- :class:`Described`: ``description``, the backend in words for the report (``LLM judge 'gpt-4o'
  behind an OpenAI-compatible endpoint``); without it the report names the spec;
- :class:`CountsRequests`: ``requests_sent``, the HTTP requests sent over the backend's life, every
  attempt counted (what the report's work line says a judge sent).

The abilities of one kind only live beside that kind's Protocol (a judge's planned calls, an
originality backend's announcement of its queries, a generator's identity).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["CountsRequests", "Described", "Preflighted", "description_of"]


@runtime_checkable
class Preflighted(Protocol):
    """A backend that reaches something outside the run and can check it cheaply first."""

    def check(self) -> None:
        """Make sure, within seconds, that the run's requests can be answered; raise a
        :class:`~pytest_novelty.infra.errors.PreflightError` (or a ``ConfigError`` for a wrong name)
        otherwise."""
        ...


@runtime_checkable
class Described(Protocol):
    """A backend that says what it is in words (the report shows this instead of its spec)."""

    description: str


@runtime_checkable
class CountsRequests(Protocol):
    """A backend that counts the HTTP requests it sends (every attempt)."""

    @property
    def requests_sent(self) -> int:
        """Requests sent over the backend's life."""
        ...


def description_of(backend: object, spec: str) -> str:
    """``backend`` in words: its :class:`Described` description, else ``spec``."""
    return str(backend.description) if isinstance(backend, Described) else spec
