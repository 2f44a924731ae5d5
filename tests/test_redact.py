"""One redaction function: URL user info and secret query values, authorization headers, key-shaped
strings, registered secrets wherever a server echoes them; errors are redacted when made."""

from __future__ import annotations

import pytest

from pytest_novelty.infra.errors import ConfigError, HarnessError
from pytest_novelty.infra.redact import redact, redact_data, register_secret, secrets_in_url


@pytest.mark.parametrize(
    ("text", "secret", "kept"),
    [
        pytest.param("http://host:8000/v1?api_key=abc123XYZ&model=m", "abc123XYZ",
                     "http://host:8000/v1?api_key=***&model=m", id="query-value"),
        pytest.param("see https://user:hunter22@models.example/ckpt now", "hunter22",
                     "see https://models.example/ckpt now", id="url-user-info"),
        pytest.param("no route /v1/?token=tok9876chat/completions", "tok9876chat",
                     "no route /v1/?token=***", id="query-value-in-a-path"),
        pytest.param("Authorization: Bearer abcdef123456", "abcdef123456",
                     "Authorization: Bearer ***", id="authorization-header"),
        pytest.param("{'api-key': 'zz-secret-99'}", "zz-secret-99", "'api-key': '***'", id="key-field"),
        pytest.param("Incorrect API key provided: sk-proj-abcdefgh1234", "abcdefgh1234",
                     "Incorrect API key provided: ***", id="openai-key"),
        pytest.param("hf token hf_abcdefghijklmnopqrst", "abcdefghijklmnopqrst", "hf token ***", id="hub-token"),
    ],
)
def test_secrets_are_masked(text: str, secret: str, kept: str) -> None:
    out = redact(text)
    assert secret not in out and kept in out


def test_plain_text_and_harmless_queries_are_kept() -> None:
    text = "story: quality = 0.5120 at http://127.0.0.1:8000/v1?model=m (3 attempts)"
    assert redact(text) == text


def test_a_registered_secret_is_masked_wherever_it_is_echoed() -> None:
    register_secret("echo-me-4815")
    assert redact("HTTP 401: you sent echo-me-4815, which is wrong") == "HTTP 401: you sent ***, which is wrong"
    register_secret("pa ss/word+9")
    assert redact("path /v1?x=pa%20ss%2Fword%2B9 echoed") == "path /v1?x=*** echoed"  # URL-quoted too


def test_the_env_key_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "plainvalue2718")
    assert redact("the server said plainvalue2718") == "the server said ***"


def test_secrets_in_a_url_are_found_for_registration() -> None:
    assert secrets_in_url("https://me:pw1234@h/v1?api_key=k-55&x=1") == ["me", "pw1234", "k-55"]


def test_json_like_values_are_redacted_throughout() -> None:
    data = {"rows": [{"judge": "http://h/v1?key=abcd9999"}], "n": 3, "pair": ("Bearer qwertyuiop1",)}
    out = redact_data(data)
    assert out == {"rows": [{"judge": "http://h/v1?key=***"}], "n": 3, "pair": ("Bearer ***",)}


def test_errors_are_redacted_when_made() -> None:
    assert "s3cr3tvalue" not in str(HarnessError("judge at http://h/v1?api_key=s3cr3tvalue failed"))
    assert "pw9876" not in str(ConfigError("bad", path="https://u:pw9876@h/x", field="--model"))


def test_a_registered_secret_inside_a_longer_key_leaves_no_piece_of_either() -> None:
    """A secret registered earlier in the process (another component's key, a part of a URL) that
    is the start of a longer key-shaped string: masked first on its own, it left the key's tail
    behind (``***ghijkl``), no longer shaped like a key; both are one masked span now."""
    key = "sk-test-0123456789abcdefghijkl"
    register_secret("sk-test-0123456789abcdef")
    register_secret("9abcdefghijkl-and-more")  # overlaps the key's end and runs past it
    assert redact(f"reply: {key} end") == "reply: *** end"
    assert redact(f"reply: {key}-and-more end") == "reply: *** end"
    assert redact("reply: sk-test-0123456789abcdef end") == "reply: *** end"
