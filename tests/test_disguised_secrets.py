"""Issue #46 item 8: redaction catches disguised echoes of a registered key (normalised before matching), and the
CLI writes control characters from documents and file names as visible escapes."""
from __future__ import annotations

import base64
import json

import pytest

from core.text import MASK, redact, register_secret, terminal_safe

KEY = "proxy-Token-7f3a9c1e5b2d4a6f8e0c"  # not of the sk-ant- shape: only the registered-secret path can hide it
SK = "sk-ant-api03-Zx9Qw7Er5Ty3Ui1Op0As8Df6Gh4Jk2Lm-Nb7Vc5Xz3Aq1Sw9De7Fr5Tg3Yh1Uj0Ik8Ol6Pm4-AAAAAA"


def disguises(k: str) -> dict[str, str]:
    return {
        "upper": k.upper(), "zero-width-joined": "\u200d".join(k), "zero-width-space": "\u200b".join(k),
        "base64": base64.b64encode(k.encode()).decode(),
        "base64 inside a longer run": base64.b64encode(b"prefix:" + k.encode() + b":suffix").decode(),
        "base64 url-safe": base64.urlsafe_b64encode(b"a" + k.encode()).decode(),
        "reversed": k[::-1], "spaced": " ".join(k), "html decimal entities": "".join(f"&#{ord(c)};" for c in k),
        "html hex entities": "".join(f"&#x{ord(c):x};" for c in k),
        "non-breaking hyphens": k.replace("-", "\u2011"), "minus signs": k.replace("-", "\u2212"),
        "wrapped at column 20": "\n".join(k[i:i + 20] for i in range(0, len(k), 20)),
        "first 20 characters": k[:20], "last 18 characters": k[-18:], "middle run": k[8:26],
        "fullwidth": "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in k),
        "upper and spaced": " ".join(k.upper()),
    }


@pytest.mark.parametrize("key", [KEY, SK])
def test_every_disguised_form_is_masked(key: str) -> None:
    register_secret(key)
    leaked = []
    for name, form in disguises(key).items():
        out = redact(f"The reply quoted <{form}> in full.")  # (a run may extend into neighbours that match the key)
        if form in out or MASK not in out or out.count(MASK) > 1:
            leaked.append(name)
        assert out.startswith("The reply quoted <") and out.endswith("> in full."), (name, out)
    assert leaked == []


def test_ordinary_text_is_left_alone() -> None:
    register_secret(KEY)
    for text in ("The proxy token is rotated every 90 days.", "Authorization: required", "see section 7f3a",
                 "Token 2024-10-01 release notes: proxy-Token rotation.", "&amp; &lt;b&gt; ‑ non-breaking",
                 "a zero\u200bwidth space"):
        assert redact(text) == text


def test_a_zero_width_joined_key_in_a_reply_never_reaches_the_store(tmp_path) -> None:  # noqa: ANN001
    from core.models.llm import AnthropicLLM, LLMRequest, TextBlock
    from core.store import Store
    from tests.anthropic_stub import start_stub

    stub = start_stub(key=KEY)
    try:
        stub.state.responder = lambda body: "Here: " + "\u200d".join(KEY) + " and " + KEY.upper()
        store = Store(tmp_path / "w.duckdb")
        llm = AnthropicLLM(stub.key, base_url=stub.base_url, ledger=store.ledger, sleep=lambda s: None)
        resp = llm.complete(LLMRequest("claude-haiku-4-5", (TextBlock("s"),), (TextBlock("q"),), purpose="answer"))
        assert resp.text == f"Here: {MASK} and {MASK}"
        store.close()
    finally:
        stub.stop()
    data = (tmp_path / "w.duckdb").read_bytes()
    for form in ("\u200d".join(KEY).encode(), KEY.upper().encode(), KEY.encode()):
        assert form not in data


def test_terminal_escapes_are_shown_not_obeyed() -> None:
    hostile = "a\x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\ \x1b[8mhidden\x1b[0m\rover\u202edcba\x9b2J\n\tok"
    out = terminal_safe(hostile)
    assert "\x1b" not in out and "\r" not in out and "\u202e" not in out and "\x9b" not in out
    assert "\\x1b]8;;http://evil.example" in out and out.endswith("\n\tok")


def test_cli_query_and_ingest_print_control_characters_escaped(tmp_path, capsys) -> None:  # noqa: ANN001
    from core import cli

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "evil\x1b[8mname.md").write_text("# Pump\n\nThe pump \x1b]8;;http://evil.example\x1b\\runs\x1b]8;;\x1b\\ "
                                              "at 40 bar \x1b[8msecret\x1b[0m.\n\n" + "The pump station log is kept. " * 20)
    db = str(tmp_path / "w.duckdb")
    assert cli.main(["ingest", str(docs), "--db", db]) == 0
    assert cli.main(["query", "pump bar", "--db", db]) == 0
    assert cli.main(["query", "pump bar", "--db", db, "--json"]) == 0
    captured = capsys.readouterr()
    both = captured.out + captured.err
    assert "\x1b" not in both and "\\x1b" in both
    json.loads(captured.out.strip().splitlines()[-1])  # JSON output is still JSON
