"""The llama.cpp model behind the local provider: loaded once, used by one thread at a time.

Everything here is blocking and runs on the provider's single worker thread, never on the event
loop. llama.cpp keeps the tokens it evaluated last; `create_chat_completion` evaluates only what
follows the longest common prefix, so the stable prefix (the system prompt's stable part and
the worked examples, identical from turn to turn and site to site) costs its prompt time once per
process, and not even that when its saved state is restored (`prefix.py`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import llama_cpp
from llama_cpp import llama_chat_format
from llama_cpp.llama_grammar import LlamaGrammar

from pressloop.errors import ProviderError
from pressloop.providers.local.backends import CpuBackend, load_cpu_backend
from pressloop.providers.local.gbnf import schema_to_gbnf
from pressloop.providers.local.generation import Generation
from pressloop.providers.local.options import ModelOptions
from pressloop.providers.local.prefix import PrefixStore

# llama.cpp's settings for 2 cores, measured with `bench/local_model.py --tuning` (docs/
# benchmarks.md, "Local model"): the physical batch as large as the logical one (a larger or
# smaller one read the prompt no faster), flash attention off (it read the prompt no faster and
# generated slower; a q8_0 cache read it slower still).
UBATCH_TOKENS = 512
FLASH_ATTENTION = False


class LocalModel:
    """One loaded GGUF model. Not thread-safe: the provider calls it from one thread only."""

    def __init__(self, options: ModelOptions) -> None:
        self.options = options
        # Before any model is loaded: llama.cpp has no CPU backend until one is chosen.
        self.backend: CpuBackend = load_cpu_backend(options.cpu_variant, probe_model=options.path)
        self._llama: llama_cpp.Llama | None = None
        self._grammars: dict[str, LlamaGrammar] = {}
        self.load_seconds: float | None = None
        self._template: tuple[str, str, str] | None = None
        self._late_system: bool | None = None
        # Where the system prompt's state is kept between starts (None: not kept).
        self.prefixes: PrefixStore | None = None
        if options.prefix_dir is not None:
            info = options.path.stat()
            key = (
                f"{options.path.name}:{info.st_size}:{info.st_mtime_ns}:{options.context_tokens}"
                f":fa={int(FLASH_ATTENTION)}"  # the cache's layout differs with flash attention
            )
            self.prefixes = PrefixStore(
                options.prefix_dir,
                model_key=key,
                environment={
                    "llama_cpp": self.backend.llama_cpp_version,
                    "cpu_variant": self.backend.chosen.name,
                },
            )
        self.prefix_restored = 0

    @property
    def threads(self) -> int:
        return self.options.threads or os.cpu_count() or 1

    def tuning(self) -> tuple[int, int, int, bool]:
        """(threads, n_batch, n_ubatch, flash_attn) as llama.cpp is given them."""
        batch = self.options.batch_tokens
        return self.threads, batch, min(UBATCH_TOKENS, batch), FLASH_ATTENTION

    def load(self) -> llama_cpp.Llama:
        if self._llama is None:
            started = time.monotonic()
            threads, batch, ubatch, flash = self.tuning()
            try:
                self._llama = llama_cpp.Llama(
                    model_path=str(self.options.path),
                    n_ctx=self.options.context_tokens,
                    n_batch=batch,
                    n_ubatch=ubatch,
                    n_threads=threads,
                    n_threads_batch=threads,
                    flash_attn=flash,
                    verbose=False,
                )
            except (ValueError, RuntimeError) as exc:
                raise ProviderError(
                    f"llama.cpp could not load {self.options.path}: {exc}", retryable=False
                ) from exc
            self.load_seconds = time.monotonic() - started
        return self._llama

    def grammar(self, schema_json: str) -> LlamaGrammar:
        """The grammar for a schema, built and checked once per distinct schema."""
        grammar = self._grammars.get(schema_json)
        if grammar is None:
            text = schema_to_gbnf(json.loads(schema_json))
            self._check_grammar(text)
            grammar = LlamaGrammar.from_string(text, verbose=False)
            if len(self._grammars) > 8:  # a few catalogs at most; never grow without bound
                self._grammars.clear()
            self._grammars[schema_json] = grammar
        return grammar

    def _check_grammar(self, text: str) -> None:
        # llama.cpp answers a grammar it cannot parse with a null sampler, and sampling with
        # that crashes the process: parse it once here and refuse it with a clear error.
        vocab = self.load()._model.vocab
        sampler = llama_cpp.llama_sampler_init_grammar(vocab, text.encode(), b"root")
        if not sampler:
            raise ProviderError(
                "llama.cpp refused the decision grammar built from the action catalog",
                retryable=False,
            )
        llama_cpp.llama_sampler_free(sampler)

    def close(self) -> None:
        """Free the model (its memory map and context)."""
        if self._llama is not None:
            self._llama.close()
            self._llama = None
            self._grammars.clear()

    def forget_prefix(self) -> None:
        """Drop the evaluated tokens: the next prompt is evaluated whole (benchmarks)."""
        if self._llama is not None:
            self._llama.reset()  # type: ignore[no-untyped-call]

    def generate(
        self,
        messages: list[dict[str, str]],
        *,
        schema_json: str | None,
        max_tokens: int,
        stable: int = 1,
    ) -> Generation:
        """Answer `messages`; the first `stable` of them (the system prompt and the worked
        examples) are the same from request to request, and their state is kept."""
        llama = self.load()
        started = time.monotonic()
        prompt = self._tokens(messages, generation_prompt=True)
        if messages and messages[0]["role"] == "system":
            prefix = self._tokens(messages[:stable], generation_prompt=False)
            self._warm_prefix(llama, prefix, prompt)
        cached = _common_prefix(list(llama.input_ids[: llama.n_tokens]), prompt)
        try:
            answer: Any = llama.create_completion(
                prompt=prompt,
                grammar=self.grammar(schema_json) if schema_json else None,
                max_tokens=max_tokens,
                temperature=0.0,  # greedy: the same prompt gives the same decision
                repeat_penalty=1.0,
                stream=False,
            )
        except ValueError as exc:  # e.g. the prompt does not fit the context window
            raise ProviderError(
                f"the local model could not answer: {exc}. A longer context "
                "(PRESSLOOP_LOCAL_CONTEXT) or a shorter conversation helps.",
                retryable=False,
            ) from exc
        choice = answer["choices"][0]
        usage = answer.get("usage") or {}
        return Generation(
            text=choice.get("text") or "",
            prompt_tokens=int(usage.get("prompt_tokens", len(prompt))),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            finish_reason=choice.get("finish_reason"),
            seconds=time.monotonic() - started,
            cached_tokens=cached,
        )

    def takes_late_system(self) -> bool:
        """Whether the chat template shows a system message that comes after other turns (the
        provider sends the site's context that way, after the worked examples); some templates
        refuse one or drop it, and then get the whole system prompt first."""
        if self._late_system is None:
            probe = [
                {"role": "system", "content": "s"},
                {"role": "user", "content": "u"},
                {"role": "assistant", "content": "a"},
                {"role": "system", "content": "LATE-SYSTEM-PROBE"},
                {"role": "user", "content": "v"},
            ]
            try:
                text = self._render(probe, generation_prompt=True)
            except Exception:  # noqa: BLE001 (a template may raise anything, e.g. "roles must alternate")
                text = ""
            self._late_system = "LATE-SYSTEM-PROBE" in text
        return self._late_system

    def prefix_state(self, stable: list[dict[str, str]]) -> Path | None:
        """Where the state of these stable messages is (or would be) saved; None: not kept."""
        if self.prefixes is None:
            return None
        return self.prefixes.path(self._tokens(stable, generation_prompt=False))

    def save_prefix_state(
        self, stable: list[dict[str, str]], progress: Callable[[int, int], None] | None = None
    ) -> Path | None:
        """Evaluate these stable messages and save their state (`progress(done, total)` after
        each batch of tokens); None when states are not kept."""
        if self.prefixes is None:
            return None
        llama = self.load()
        tokens = self._tokens(stable, generation_prompt=False)
        llama.reset()  # type: ignore[no-untyped-call]
        step = max(self.options.batch_tokens, 1)
        for start in range(0, len(tokens), step):
            llama.eval(tokens[start : start + step])
            if progress is not None:
                progress(min(start + step, len(tokens)), len(tokens))
        self.prefixes.save(llama, tokens)
        return self.prefixes.path(tokens)

    def tokens(self, messages: list[dict[str, str]]) -> list[int]:
        """The tokens of these messages as a prefix (no generation prompt after them)."""
        return self._tokens(messages, generation_prompt=False)

    def _tokens(self, messages: list[dict[str, str]], *, generation_prompt: bool) -> list[int]:
        """The prompt as the model's own chat template (from the GGUF file) lays it out."""
        text = self._render(messages, generation_prompt=generation_prompt)
        return self.load().tokenize(text.encode(), add_bos=False, special=True)

    def _render(self, messages: list[dict[str, str]], *, generation_prompt: bool) -> str:
        llama = self.load()
        if self._template is None:
            template = llama.metadata.get("tokenizer.chat_template")
            if not template:
                raise ProviderError(
                    f"{self.options.path} has no chat template; the local provider needs an "
                    "instruction-tuned GGUF model",
                    retryable=False,
                )
            eos = llama._model.token_get_text(llama.token_eos())
            bos = llama._model.token_get_text(llama.token_bos()) if llama.token_bos() >= 0 else ""
            self._template = (template, eos, bos)
        template, eos, bos = self._template
        formatter = llama_chat_format.Jinja2ChatFormatter(
            template, eos, bos, add_generation_prompt=generation_prompt
        )
        return formatter(messages=messages).prompt  # type: ignore[arg-type]

    def _warm_prefix(self, llama: llama_cpp.Llama, prefix: list[int], prompt: list[int]) -> None:
        """Make sure the system prompt's state is loaded: in memory, from disk, or evaluated
        now and saved for the next start."""
        if self.prefixes is None or len(prefix) >= len(prompt) or prompt[: len(prefix)] != prefix:
            return
        if list(llama.input_ids[: min(llama.n_tokens, len(prefix))]) == prefix:
            return  # the last request had the same system prompt: llama.cpp reuses it
        if self.prefixes.restore(llama, prefix):
            self.prefix_restored += 1
            return
        llama.reset()  # type: ignore[no-untyped-call]
        llama.eval(prefix)
        self.prefixes.save(llama, prefix)


def _common_prefix(kept: list[int], prompt: list[int]) -> int:
    """How many leading tokens of `prompt` llama.cpp already holds (it reads only the rest)."""
    count = 0
    for held, wanted in zip(kept, prompt, strict=False):
        if held != wanted:
            break
        count += 1
    return count
