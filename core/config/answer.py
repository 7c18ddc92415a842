"""Answer-side sections: the answerer, the LLM client's transport settings and the semantic answer cache."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from core.config.base import EXPERT, Section, chosen_in


class AnswerConfig(Section):
    """The answer stage: Claude with citations, or the offline extractive answerer; both refuse without support."""

    enabled: bool = Field(True, description="write an answer; false: the trace ends with the candidates")
    mode: Literal["auto", "llm", "extractive"] = Field(
        "auto", description="auto: Claude when a key is set, else extractive; llm: Claude (extractive, saying so, "
                            "without a key); extractive: sentences copied from the candidates")
    synthesis: Literal["auto", "stuff", "map_reduce", "refine", "tree"] = Field(
        "auto", description="how the answer reads its chunks: stuff: all at once; map_reduce: each chunk alone (its "
                            "best sentences offline, a Claude call each with a key), then one merged, cited answer; "
                            "refine: chunk by chunk, the answer grown only by what a chunk adds; tree: map, then "
                            "reduce in groups of four, then once more; auto: a comparison with two items found gets "
                            "one sentence per item, the multi-hop route map_reduce, others stuff. When graph global "
                            "search ran (graph.mode = global), its reduce is the answer")
    model: str = Field("claude-sonnet-4-6", description="model that writes llm answers")
    # A number, not None, so a config still saves as TOML.
    refusal_threshold: float = Field(
        -1.0, ge=-1, le=1, description="extractive: refuse below this support probability (-1: the fitted model's "
                                       "threshold)",
        json_schema_extra=chosen_in("bench/results/answer_public.json",
                                    "-1 takes the workspace's calibrated threshold, else the prior fitted with the "
                                    "support model (core/models/data/support_model.npz) by "
                                    "bench/answer_public.py on public data's fitting split and checked on its "
                                    "report split and the sample sets"))
    max_chunks: int = Field(8, ge=1, le=50, description="final candidates handed to the answerer")
    max_sentences: int = Field(3, ge=1, le=10, description="extractive: sentences quoted at most")
    max_tokens: int = Field(600, ge=64, le=8192, description="llm: output tokens of the answer at most")
    max_usd: float = Field(0.25, ge=0, le=100, description="llm synthesis (map_reduce / refine / tree): dollars its "
                                                          "calls may cost together; no call starts unless the "
                                                          "worst case of all of them (then of each) fits, else the "
                                                          "extractive synthesis answers, saying so")
    glossary: str = Field("", description="stable text cached with the instructions (terms and abbreviations of "
                                          "this corpus); \"\" = none")
    verify: bool = Field(True, description="check the answer against the question's constraints (names, roles, "
                                           "years, months, numbers, ordinals, superlatives, negation): an offline "
                                           "answer whose quoted sentences miss one is refused with the reason, a "
                                           "Claude answer is flagged (the verify stage)")


class LLMConfig(Section):
    """The LLM client shared by every stage: which provider answers (Claude, an OpenAI-compatible server, or a GGUF
    file run in process), retries, timeout, prompt-cache lifetime and the grader's model. A local provider answers
    every stage's call with its own model (the stages' model settings name Claude models and apply to Claude only);
    the ledger and the trace name the provider and model that answered."""

    provider: Literal["anthropic", "openai-compatible", "gguf"] = Field(
        "anthropic", description="anthropic: Claude (ANTHROPIC_API_KEY); openai-compatible: a chat server at "
                                 "llm.base_url (Ollama, vLLM, llama.cpp server, LM Studio; key from LLM_API_KEY if "
                                 "it needs one); gguf: the GGUF file llm.gguf_path run in this process "
                                 "(llama-cpp-python, `make local-llm`). Without what a provider needs, the offline "
                                 "stand-ins answer and say why")
    base_url: str = Field("", description="openai-compatible: the server's /v1 root (e.g. http://127.0.0.1:8080/v1); "
                                          "/chat/completions and /models are below it")
    model: str = Field("", description="openai-compatible: the model name the server is asked for")
    gguf_path: str = Field("", description="gguf: the model file to load")
    threads: int = Field(2, ge=1, le=256, description="gguf: CPU threads llama.cpp uses")
    context_tokens: int = Field(8192, ge=512, le=131072, description="gguf: context window (prompt and reply "
                                                                    "tokens) of the loaded model")
    reuse_prefix: bool = Field(True, description="local providers: keep the KV state of a shared prompt prefix (the "
                                                 "document, for each of its chunks' contexts) instead of evaluating "
                                                 "it again; booked as cache reads", json_schema_extra=EXPERT)

    max_retries: int = Field(4, ge=0, le=10, description="retries of a failed or malformed call (with backoff); "
                                                         "0 = one attempt")
    timeout_s: float = Field(60.0, gt=0, description="seconds one attempt may take in total (connect, send and every "
                                                      "read together); a retry starts only within the caller's time "
                                                      "budget")
    cache_ttl: Literal["5m", "1h"] = Field("5m", description="prompt-cache lifetime of cached prefixes (1h costs "
                                                             "more to write)")


class AnswerCacheConfig(Section):
    """Semantic answer cache (core/answer/cache.py): a close enough earlier question in the same workspace, corpus
    version and answer-relevant configuration gets its stored answer, if the guard agrees."""

    enabled: bool = Field(True, description="look up and store answers; false: every question is answered afresh")
    threshold: float = Field(
        0.75, ge=0.5, le=1.0, description="cosine at or above which the guard is asked",
        json_schema_extra=chosen_in("bench/results/answer_cache.json",
                                    "on bench/answer_cache.py's dev split: the most paraphrase hits with false hits "
                                    "at most 0.5% of the must-not-share pairs, then the highest thresholds", expert=True))
    swap_threshold: float = Field(
        0.95, ge=0, le=1.0, description="higher cosine needed when each question has words the other lacks (a word "
                                        "swapped, not only added)",
        json_schema_extra=chosen_in("bench/results/answer_cache.json",
                                    "the guard+swap variant's dev choice; it decides when the embedder gives no "
                                    "token vectors and the verifier cannot run", expert=True))
    guard: bool = Field(True, description="check negation, numbers, names and other vetoes; false: the cosine "
                                          "threshold alone (serves contradictions)")
    word_check: bool = Field(False, description="second check: a content word swapped for an unrelated one makes a "
                                                "different question (one embedder call per candidate)", json_schema_extra=EXPERT)
    word_floor: float = Field(0.3, ge=0, le=1, description="word cosine below which a swapped word is a change", json_schema_extra=EXPERT)
    verifier: bool = Field(True, description="with token vectors: a pair passing the vetoes is served only when the "
                                             "learned verifier agrees (core/answer/cache_verifier.py)", json_schema_extra=EXPERT)
    verifier_threshold: float = Field(
        0.6, ge=0, le=1, description="P(same question) the verifier needs for a hit",
        json_schema_extra=chosen_in("bench/results/answer_cache.json",
                                    "fitted and chosen with the verifier on bench/answer_cache.py's dev split", expert=True))
    pair_model: bool = Field(
        False, description="with the verifier: average its P with the fine-tuned MiniLM pair model's "
                           "(core/answer/cache_pair.py)",
        json_schema_extra=chosen_in("bench/results/answer_cache.json",
                                    "it wins on the dev pairs but scores plain rewordings of a corpus's own "
                                    "questions low (product_default); turned on, use threshold 0.68 and "
                                    "verifier_threshold 0.65, its dev choice", expert=True))
    ttl_s: float = Field(7 * 24 * 3600, ge=0, description="seconds a cached answer lives; 0 = no expiry")
    max_entries: int = Field(5000, ge=1, le=1_000_000, description="newest answers compared per workspace")
