"""A fake OpenAI-compatible server on 127.0.0.1 for judge, served-model tests and benchmarks.

It is a real HTTP server (:class:`~tests.servers.base.FakeServer`: ``http.server`` in a background
thread, HTTP/1.1 keep-alive), so the ``openai`` client talks to it exactly as to a hosted endpoint. It speaks
``POST /v1/chat/completions`` (``model``, ``messages``, ``n``, ``temperature``),
``POST /v1/completions`` (``model``, ``prompt``: what a served base model is asked) and
``GET /v1/models``, answers with OpenAI-shaped JSON, and counts every request.

Faults are injected with :meth:`FakeOpenAI.inject`, optionally only for requests whose last user
message (or completion prompt) contains a marker string, for a given number of requests:

- ``status``: answer with an HTTP error (429, 500, 503, ...), optionally with ``Retry-After`` and
  an error ``message`` of your choosing;
- ``hang``: read the request and never answer (the client times out); ``drop``: close the
  connection without answering;
- ``delay``: extra latency before a normal answer;
- ``no_score``: answer with prose that has no score; ``out_of_range``: answer ``Score: 9``;
- replies without an answer, each a well-formed HTTP 200: ``null_text`` (``"text": null``, or a
  chat message with ``"content": null``), ``no_text`` (the key left out), ``no_choices`` (an empty
  ``choices`` list), ``error_finish`` (the reply cut short with ``finish_reason`` ``message`` or
  ``"error"``), ``empty_no_finish`` (``""`` with no ``finish_reason``);
- ``empty_stop``: the legitimate empty answer (``""`` with ``finish_reason: "stop"``, a model that
  ends its answer at once);
- ``garbage``: HTTP 200 whose body is not JSON (a proxy's error page, or the raw bytes of ``message``).

Server-wide behaviours: ``latency`` before every answer, ``n_mode`` (``"support"``, ``"ignore"``
returns a single choice, ``"reject"`` answers 400 to ``n > 1``), ``reject_temperature`` (400 like a
reasoning model), ``api_key`` (401 unless the request carries it, on every route, with the key it got echoed
in the message as OpenAI does) and ``models`` (404 for others). Paths may carry a query
(``?api_key=...``), as requests to a base URL with one do.

Usage::

    with FakeOpenAI(latency=0.01) as server:
        judge = OpenAIJudge("judge-model", base_url=server.url)
        server.inject("status", status=429, retry_after=1, times=2)
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

from tests.servers.base import FakeHandler, FakeServer, Fault

__all__ = ["FAULT_KINDS", "FakeOpenAI", "Fault", "default_reply"]

FAULT_KINDS = (
    "status", "hang", "drop", "delay", "no_score", "out_of_range",
    "null_text", "no_text", "no_choices", "error_finish", "empty_no_finish", "empty_stop", "garbage",
)  # fmt: skip
REPLY_FAULTS = frozenset({"null_text", "no_text", "no_choices", "error_finish", "empty_no_finish", "empty_stop"})
"""The faults that change the shape of an HTTP 200 reply (see the module doc)."""


def default_reply(prompt: str, choice: int) -> str:
    """A plausible judge answer; its score (0-5) depends only on the prompt text and the choice index."""
    score = (int(hashlib.sha256(prompt.encode()).hexdigest(), 16) + choice) % 6
    return f"The response meets some criteria and misses others.\n\n**Score:** {score}"


class _Handler(FakeHandler):
    fake: FakeOpenAI

    def do_GET(self) -> None:
        if not self._authorized():
            self._refuse()
            return
        if self.path.split("?", 1)[0].rstrip("/") == "/v1/models":
            with self.fake._lock:
                self.fake.model_lists += 1
            names = self.fake.models or ("judge-model",)
            data = [{"id": name, "object": "model", "created": 0, "owned_by": "fake"} for name in names]
            self._send(200, {"object": "list", "data": data})
        else:
            self._error(404, f"no route {self.path}", "not_found")

    def _authorized(self) -> bool:
        expected = f"Bearer {self.fake.api_key}" if self.fake.api_key else None
        return expected is None or self.headers.get("Authorization") == expected

    def _refuse(self) -> None:
        """401 echoing the key it got, partly masked, as OpenAI does (redaction must catch the echo)."""
        given = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        self._error(401, f"Incorrect API key provided: {given}.", "invalid_api_key", kind="authentication_error")

    def post(self, raw: bytes) -> None:
        route = self.path.split("?", 1)[0].rstrip("/")
        if route not in ("/v1/chat/completions", "/v1/completions"):
            self._error(404, f"no route {self.path}", "not_found")
            return
        chat = route == "/v1/chat/completions"
        try:
            body = json.loads(raw)
        except ValueError:
            self._error(400, "the body is not valid JSON", "invalid_json")
            return
        fake = self.fake
        authorized = self._authorized()
        fake._record_chat(body if isinstance(body, dict) else {"invalid": True}, authorized)
        problem = _validate(body) if chat else _validate_completion(body)
        if problem:
            self._error(400, problem[1], "invalid_request_error", param=problem[0])
            return
        if not authorized:
            self._refuse()
            return
        if fake.models is not None and body["model"] not in fake.models:
            self._error(404, f"The model '{body['model']}' does not exist.", "model_not_found")
            return
        n = int(body.get("n") or 1)
        if fake.reject_temperature and "temperature" in body:
            self._error(
                400,
                "This model only runs at its default temperature; remove 'temperature'.",
                "unsupported_value",
                param="temperature",
            )
            return
        if fake.n_mode == "reject" and n > 1:
            message = "Only a single choice is supported: 'n' must be 1."
            self._error(400, message, "unsupported_value", param="n")
            return
        prompt = _last_user_message(body) if chat else str(body["prompt"])
        fault = fake._take_fault(prompt)
        if fake.latency:
            time.sleep(fake.latency)
        if fault is not None:
            if fault.kind == "status":
                message = fault.message or f"injected status {fault.status}"
                self._error(fault.status, message, "injected", headers=fault.headers())
                return
            if self._unanswered(fault):
                return
            if fault.kind == "delay":
                time.sleep(fault.seconds)
            if fault.kind == "garbage":  # ``message``: the raw body instead (any bytes, as surrogate escapes)
                garbage = fault.message.encode("utf-8", "surrogateescape") if fault.message is not None else None
                self._send(200, garbage or b"<html><body>502 Bad Gateway</body></html>")
                return
        if fake.n_mode == "ignore":
            n = 1
        texts = []
        for choice in range(n):
            if fault is not None and fault.kind == "no_score":
                texts.append("The response is a reasonable attempt, though I will not give a number.")
            elif fault is not None and fault.kind == "out_of_range":
                texts.append("Excellent work.\nScore: 9")
            else:
                texts.append(fake.reply(prompt, choice))
        reply = _completion(body["model"], texts) if chat else _text_completion(body["model"], texts)
        if fault is not None and fault.kind in REPLY_FAULTS:
            _break_reply(reply, fault, chat)
        self._send(200, reply)

    def _error(
        self,
        status: int,
        message: str,
        code: str,
        *,
        param: str | None = None,
        kind: str = "invalid_request_error",
        headers: dict[str, str] | None = None,
    ) -> None:
        error = {"message": message, "type": kind, "param": param, "code": code}
        self._send(status, {"error": error}, headers)


class FakeOpenAI(FakeServer):
    """The server; see the module docstring. Start it with ``with`` or :meth:`start`."""

    fault_kinds = FAULT_KINDS
    fault_seconds = 30.0
    handler = _Handler
    name = "fake-openai"
    path = "/v1"

    def __init__(
        self,
        *,
        latency: float = 0.0,
        n_mode: str = "support",
        reject_temperature: bool = False,
        api_key: str | None = None,
        models: tuple[str, ...] | None = None,
        reply: Callable[[str, int], str] = default_reply,
    ) -> None:
        if n_mode not in ("support", "ignore", "reject"):
            raise ValueError(f"n_mode must be support, ignore or reject, not {n_mode!r}")
        super().__init__()
        self.latency = latency
        self.n_mode = n_mode
        self.reject_temperature = reject_temperature
        self.api_key = api_key
        self.models = models
        self.reply = reply
        self.authorized: list[bool] = []
        """Per request, whether it carried the expected key (no key is ever recorded)."""
        self.arrivals: list[float] = []
        """Per request, its arrival time (``time.monotonic()``)."""
        self.model_lists = 0
        """``GET /v1/models`` requests answered (a preflight's; not counted in :attr:`requests`)."""

    def _record_chat(self, body: dict[str, Any], authorized: bool) -> None:
        """Record one chat request: its body, whether it carried the key, when it arrived."""
        with self._lock:
            self.requests.append(body)
            self.authorized.append(authorized)
            self.arrivals.append(time.monotonic())


_ROLES = ("system", "developer", "user", "assistant")


def _validate(body: Any) -> tuple[str | None, str] | None:
    """Return (param, message) for a request the real API would reject, else None."""
    if not isinstance(body, dict):
        return None, "the body must be a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model", "'model' is required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages", "'messages' must be a non-empty list"
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            return "messages", "each message needs a valid 'role'"
        if not isinstance(message.get("content"), str):
            return "messages", "each message needs string 'content'"
    n = body.get("n", 1)
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 128):
        return "n", "'n' must be an integer from 1 to 128"
    temperature = body.get("temperature")
    if temperature is not None and (not isinstance(temperature, (int, float)) or not 0 <= temperature <= 2):
        return "temperature", "'temperature' must be between 0 and 2"
    return None


def _validate_completion(body: Any) -> tuple[str | None, str] | None:
    """Return (param, message) for a completion request the real API would reject, else None."""
    if not isinstance(body, dict):
        return None, "the body must be a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model", "'model' is required"
    if not isinstance(body.get("prompt"), str):
        return "prompt", "'prompt' must be a string"
    return None


def _break_reply(reply: dict[str, Any], fault: Fault, chat: bool) -> None:
    """Turn a good reply into the one ``fault`` names (see the module doc), in place."""
    if fault.kind == "no_choices":
        reply["choices"] = []
        return
    for choice in reply["choices"]:
        holder, key = (choice["message"], "content") if chat else (choice, "text")
        if fault.kind == "null_text":
            holder[key] = None
        elif fault.kind == "no_text":
            del holder[key]
        elif fault.kind == "error_finish":
            holder[key] = holder[key][:5]  # cut short by the failure
            choice["finish_reason"] = fault.message or "error"
        elif fault.kind == "empty_no_finish":
            holder[key] = ""
            choice["finish_reason"] = None
        elif fault.kind == "empty_stop":
            holder[key] = ""
            choice["finish_reason"] = "stop"


def _last_user_message(body: dict[str, Any]) -> str:
    for message in reversed(body["messages"]):
        if message["role"] == "user":
            return str(message["content"])
    return ""


def _completion(model: str, texts: list[str]) -> dict[str, Any]:
    choices = [
        {
            "index": i,
            "message": {"role": "assistant", "content": text, "refusal": None},
            "finish_reason": "stop",
            "logprobs": None,
        }
        for i, text in enumerate(texts)
    ]
    return {
        "id": f"chatcmpl-fake-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": _usage(texts),
    }


def _text_completion(model: str, texts: list[str]) -> dict[str, Any]:
    choices = [{"index": i, "text": text, "finish_reason": "stop", "logprobs": None} for i, text in enumerate(texts)]
    return {
        "id": f"cmpl-fake-{time.monotonic_ns()}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": _usage(texts),
    }


def _usage(texts: list[str]) -> dict[str, int]:
    used = sum(len(text.split()) for text in texts)
    return {"prompt_tokens": 10, "completion_tokens": used, "total_tokens": 10 + used}
