"""Backends chosen by a short spec string, each registered by its prefix in its own module.

A spec names a backend and, for most, what it works on; options may follow a ``?``::

    NAME                          rules, unigram
    NAME:ARGUMENT                 openai:gpt-4o, hf:ckpt/judge, infini-gram:idx/, classifier:models/sim
    NAME:ARGUMENT?key=value&...   infini-gram:idx/?workers=4&load_to_ram=true

Each kind of backend has one :class:`Registry` beside its Protocol, and a backend module adds
itself with one decorator (``@JUDGES.register("openai", argument="MODEL", options={"timeout":
float})``). The grammar, its errors (with a did-you-mean) and the conversion of ``?key=value``
strings live here, so every kind reads and fails the same way. A kind's built-in backend modules
are imported on its first lookup, so heavy modules stay unloaded until a spec needs them.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pytest_novelty.infra.errors import ConfigError, did_you_mean

__all__ = ["Backend", "Registry", "Spec"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True)
class Backend(Generic[T]):
    """One registered backend: its prefix, how to open it, and what its spec may carry."""

    name: str
    factory: Callable[..., T]
    argument: str | None = None
    """Placeholder of the text after ``NAME:`` in messages (``MODEL``, ``PATH``); None: takes none."""
    needs: str = ""
    """What the argument is, in words, for the "needs ..." error (``a model folder``)."""
    options: Mapping[str, type | None] = field(default_factory=dict)
    """Options it accepts, each with the type a ``?key=value`` string is converted to (None: as given)."""
    summary: str = ""
    check: Callable[..., None] | None = None
    """An optional cheap check of a spec before anything heavy is loaded."""

    @property
    def usage(self) -> str:
        """How the spec is written: ``rules`` or ``openai:MODEL``."""
        return self.name if self.argument is None else f"{self.name}:{self.argument}"


@dataclass(frozen=True)
class Spec(Generic[T]):
    """A parsed spec: the backend, its argument (``""`` when none) and the options written after ``?``."""

    backend: Backend[T]
    argument: str
    options: dict[str, str]
    text: str


class Registry(Generic[T]):
    """The backends of one kind, by prefix.

    ``what`` names the kind in messages; ``field`` is where a ``ConfigError`` points (the option or
    suite key); ``builtins`` are the modules that register the built-in backends. ``settings`` names
    the keywords callers hand every factory (each takes those it uses); any other is a ``TypeError``
    with a did-you-mean, so a misspelt setting never vanishes.
    """

    def __init__(
        self, what: str, *, field: str | None = None, builtins: Sequence[str] = (), settings: Sequence[str] = ()
    ) -> None:
        self.what = what
        self.field = field
        self.settings = frozenset(settings)
        self._builtins = tuple(builtins)
        self._loaded = False
        self._backends: dict[str, Backend[T]] = {}

    def register(
        self, name: str, *, argument: str | None = None, needs: str = "",
        options: Mapping[str, type | None] | Iterable[str] = (), summary: str = "",
        check: Callable[..., None] | None = None,
    ) -> Callable[[F], F]:
        """Decorator: register a class or function that opens the backend named ``name``, called as
        ``factory(argument, *args, **settings, **options)``: the argument only when it takes one, the
        settings its signature names, the options checked and converted to their declared types."""
        if not name or any(c in name for c in ":?& "):
            raise ValueError(f"a backend name is a plain word, got {name!r}")
        declared = dict(options) if isinstance(options, Mapping) else dict.fromkeys(options)

        def decorate(factory: F) -> F:
            known = self._backends.get(name)
            if known is not None and _origin(known.factory) != _origin(factory):
                raise ValueError(f"{self.what} {name!r} is already registered by {_origin(known.factory)}")
            self._backends[name] = Backend(
                name, factory, argument, needs or (f"a {argument}" if argument else ""), declared, summary, check
            )
            return factory

        return decorate

    def unregister(self, name: str) -> None:
        """Remove a backend (tests that register their own use it to clean up)."""
        self._backends.pop(name, None)

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            for module in self._builtins:
                importlib.import_module(module)

    def names(self) -> tuple[str, ...]:
        """The registered prefixes: built-ins first, in the order of ``builtins``, then the others."""
        self._load()
        order = {module: rank for rank, module in enumerate(self._builtins)}
        last = len(order)
        return tuple(sorted(self._backends, key=lambda name: order.get(self._backends[name].factory.__module__, last)))

    def get(self, name: str) -> Backend[T] | None:
        """The backend registered as ``name``, or None."""
        self._load()
        return self._backends.get(name)

    def usage(self) -> str:
        """The specs in words: ``rules, openai:MODEL, hf:PATH or reward:PATH``."""
        forms = [self._backends[name].usage for name in self.names()]
        return forms[0] if len(forms) == 1 else f"{', '.join(forms[:-1])} or {forms[-1]}"

    def _error(self, message: str) -> ConfigError:
        return ConfigError(message, field=self.field)

    def find(self, spec: str) -> Spec[T] | None:
        """The parsed spec when its prefix is registered, else None (no error): for values that may
        also be something else, such as ``--model`` (a checkpoint folder, or ``openai:NAME``)."""
        name, sep, rest = spec.strip().partition(":")
        backend = self.get(name) if sep else None
        if backend is None or backend.argument is None:
            return None
        argument, options = _split_options(rest, self._error)
        return Spec(backend, argument, options, spec)

    def parse(self, spec: str) -> Spec[T]:
        """Parse ``NAME[:ARGUMENT][?key=value&...]``; one-line errors for every way it can be wrong."""
        if not isinstance(spec, str) or not spec.strip():
            raise self._error(f"a {self.what} spec must be one of {self.usage()}, got {spec!r}")
        head, qmark, query = spec.strip().partition("?")
        name, colon, argument = head.partition(":")
        name = name.strip()
        backend = self.get(name)
        if backend is None:
            raise self._error(f"unknown {self.what} {spec!r}{did_you_mean(name, self.names())}; use {self.usage()}")
        argument = argument.strip()
        if backend.argument is None and (colon or argument):
            raise self._error(f"{self.what} {name} takes no argument: write {name!r}, got {spec!r}")
        if backend.argument is not None and not argument:
            raise self._error(f"{self.what} {name} needs {backend.needs}, as in {backend.usage}; got {spec!r}")
        _, options = _split_options(qmark + query, self._error)
        return Spec(backend, argument, options, spec)

    def options(self, parsed: Spec[T], given: Mapping[str, Any]) -> dict[str, Any]:
        """The spec's ``?`` options merged with ``given`` (which win), checked and converted."""
        backend = parsed.backend
        merged = {**parsed.options, **given}
        unknown = sorted(set(merged) - set(backend.options))
        if unknown:
            allowed = ", ".join(sorted(backend.options)) or "none"
            raise self._error(
                f"{self.what} {backend.name} has no option {unknown[0]!r}"
                f"{did_you_mean(unknown[0], backend.options)}; its options: {allowed}"
            )
        return {name: self._convert(backend, name, value) for name, value in merged.items()}

    def _convert(self, backend: Backend[T], name: str, value: Any) -> Any:
        wanted = backend.options[name]
        if wanted is None or wanted is str or not isinstance(value, str):
            return value
        try:
            if wanted is bool:
                if value.lower() in _TRUE + _FALSE:
                    return value.lower() in _TRUE
                raise ValueError(value)
            return wanted(value)
        except ValueError:
            raise self._error(
                f"option {name} of {self.what} {backend.name} takes a {wanted.__name__}, got {value!r}"
            ) from None

    def open(self, spec: str, *args: Any, options: Mapping[str, Any] | None = None, **settings: Any) -> T:
        """Parse ``spec`` and open its backend with ``args``, the ``settings`` it takes and ``options``."""
        return self.call(self.parse(spec), *args, options=options, **settings)

    def call(self, parsed: Spec[T], *args: Any, options: Mapping[str, Any] | None = None, **settings: Any) -> T:
        """Open the backend of an already parsed spec (see :meth:`register` for the call)."""
        unknown = sorted(set(settings) - self.settings)
        if unknown:
            raise TypeError(
                f"{self.what} factories take no setting {unknown[0]!r}{did_you_mean(unknown[0], self.settings)}; "
                f"the settings this registry passes: {', '.join(sorted(self.settings)) or 'none'}"
            )
        checked = self.options(parsed, options or {})
        factory = parsed.backend.factory
        leading = (parsed.argument,) if parsed.backend.argument is not None else ()
        return factory(*leading, *args, **_accepted(factory, settings), **checked)


def _split_options(text: str, error: Callable[[str], ConfigError]) -> tuple[str, dict[str, str]]:
    """``ARGUMENT?key=value&key=value`` → the argument and the options as strings."""
    base, sep, query = text.partition("?")
    options: dict[str, str] = {}
    if sep:
        for item in filter(None, query.split("&")):
            name, eq, value = item.partition("=")
            if not eq:
                raise error(f"option {item!r} needs a value, as in {item}=VALUE")
            options[name.strip()] = value.strip()
    return base.strip(), options


def _accepted(factory: Callable[..., Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings ``factory`` names in its signature (all of them when it takes ``**kwargs``)."""
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return dict(settings)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return dict(settings)
    return {name: value for name, value in settings.items() if name in parameters}


def _origin(factory: Callable[..., Any]) -> str:
    return f"{getattr(factory, '__module__', '?')}.{getattr(factory, '__qualname__', repr(factory))}"
