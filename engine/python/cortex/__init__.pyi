# Type stub of the cortex module (engine/python/src/*.c, cortex/*.py).
# docs/python.md is the guide; help(cortex.Model) the reference.
from typing import Any, AsyncIterator, Callable, Iterator, Literal, Mapping, Sequence, overload

import numpy as np
import numpy.typing as npt

__version__: str

Prompt = str | bytes | Sequence[int] | npt.NDArray[np.integer]

# ---- errors: one class per engine error code (cortex.h CX_E*) ----
class Error(Exception):
    code: int  # the CX_E* value (negative)
class FileError(Error, OSError): ...           # CX_EIO
class FormatError(Error, ValueError): ...      # CX_EFORMAT
class RangeError(Error, ValueError): ...       # CX_ERANGE
class UnsupportedError(Error): ...             # CX_EUNSUP
class InvalidArgumentError(Error, ValueError): ...  # CX_EINVAL
class OutOfMemoryError(Error, MemoryError): ...  # CX_ENOMEM
class ContextFullError(Error): ...             # CX_ECTX
class BusyError(Error): ...                    # CX_EBUSY

def cpu_features() -> str: ...
def isa(name: str | None = None) -> str: ...   # the kernel set `name` (None: auto) resolves to here
def shapes() -> list[str]: ...                 # model shapes synth() knows
def synth(shape: str, path: str, type: str = "q8_0", *, seed: int = 1, n_ctx: int = 0, n_vocab: int = 0,
          vocab: str | None = None) -> None: ...
def quantize(src: str, dst: str, type: str, *, tokenizer: str | None = None) -> dict[str, Any]: ...

class Generation:  # a named tuple (structseq)
    text: str
    tokens: list[int]
    finish_reason: Literal["stop", "length"]
    n_prompt: int
    n_cached: int      # prompt tokens whose KV the model's session already held
    n_gen: int
    ttft_ms: float     # call to first sampled token
    prefill_ms: float
    decode_ms: float   # first to last sampled token
    decode_tps: float  # (n_gen - 1) / decode time, as `cortex generate` reports it
    speculation: dict[str, Any] | None  # generate(drafter=...): steps, verified, drafted, accepted, tokens,
                                        # acceptance, mean_accepted, tokens_per_pass, draft_ms, verify_ms
                                        # (an attribute, not part of the tuple)

class Stream(Iterator[str]):
    result: Generation | None   # set once the stream is exhausted
    def close(self) -> None: ...

class Model:
    path: str
    closed: bool
    info: dict[str, Any]
    n_vocab: int
    n_ctx: int
    bos: int | None
    eos: int | None
    eot: int | None
    threads: int
    chat_template: str | None  # the chat format's name ("chatml", "llama3", ...), None if none
    chat_stop: list[str]       # the texts that end an assistant turn in that format
    def __init__(self, path: str, tokenizer: str | None = None, *, threads: int = 1, isa: str | None = None,
                 weights: Literal["auto", "mmap", "hugepages"] = "auto", repack: bool = True,
                 chat_template: str | None = None) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Model": ...
    def __exit__(self, *exc: object) -> None: ...
    def tokenize(self, text: str | bytes, add_bos: bool = True, special: bool = True) -> list[int]: ...
    def detokenize(self, ids: Sequence[int] | npt.NDArray[np.integer]) -> str: ...
    def token_piece(self, token: int, prev: int = -1) -> bytes: ...
    def is_eog(self, token: int) -> bool: ...
    def apply_chat_template(self, messages: Sequence[Mapping[str, str]], *, date: str | None = None) -> str: ...
    @overload
    def generate(self, prompt: Prompt, max_tokens: int = 16, *, stream: Literal[False] = False,
                 temperature: float = 0.8, top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05,
                 repeat_penalty: float = 1.0, repeat_last_n: int = 64, presence_penalty: float = 0.0,
                 frequency_penalty: float = 0.0, seed: int = 42, stop: str | Sequence[str] | None = None,
                 ignore_eos: bool = False, lora: "LoRA | None" = None, lora_scale: float = 1.0,
                 n_ctx: int = 0, special: bool = True, drafter: "Drafter | None" = None) -> Generation: ...
    @overload
    def generate(self, prompt: Prompt, max_tokens: int = 16, *, stream: Literal[True],
                 temperature: float = 0.8, top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05,
                 repeat_penalty: float = 1.0, repeat_last_n: int = 64, presence_penalty: float = 0.0,
                 frequency_penalty: float = 0.0, seed: int = 42, stop: str | Sequence[str] | None = None,
                 ignore_eos: bool = False, lora: "LoRA | None" = None, lora_scale: float = 1.0,
                 n_ctx: int = 0, special: bool = True, drafter: "Drafter | None" = None) -> Stream: ...
    # llama-cpp-python's shapes (OpenAI's text_completion / chat.completion objects)
    def create_completion(self, prompt: Prompt, max_tokens: int | None = 16, temperature: float = 0.8,
                          top_p: float = 0.95, min_p: float = 0.05, stop: str | Sequence[str] | None = None,
                          stream: bool = False, seed: int | None = None, top_k: int = 40,
                          repeat_penalty: float = 1.0, presence_penalty: float = 0.0,
                          frequency_penalty: float = 0.0, echo: bool = False,
                          lora: "LoRA | None" = None, **ignored: Any) -> dict[str, Any] | Iterator[dict[str, Any]]: ...
    def __call__(self, prompt: Prompt, **kw: Any) -> dict[str, Any] | Iterator[dict[str, Any]]: ...
    def create_chat_completion(self, messages: Sequence[Mapping[str, str]], max_tokens: int | None = None,
                               temperature: float = 0.8, top_p: float = 0.95, min_p: float = 0.05,
                               stop: str | Sequence[str] | None = None, stream: bool = False,
                               seed: int | None = None, top_k: int = 40, repeat_penalty: float = 1.0,
                               presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
                               lora: "LoRA | None" = None, **ignored: Any) -> dict[str, Any] | Iterator[dict[str, Any]]: ...
    def session(self, n_ctx: int = 0, threads: int | None = None, **kw: Any) -> "Session": ...
    def load_lora(self, path: str, *, type: str | None = None) -> "LoRA": ...

class Session:
    model: Model
    pos: int
    n_ctx: int
    closed: bool
    def __init__(self, model: Model, n_ctx: int = 0, threads: int | None = None, *, kv_type: str = "f32",
                 prefix_cache: bool = False, batch: int = 0, lora: "LoRA | None" = None,
                 lora_scale: float = 1.0) -> None: ...
    # feeds ids at pos; all_logits=True returns every position's logits (n x n_vocab, written by the engine
    # straight into the new array) instead of None
    def eval(self, ids: Sequence[int] | npt.NDArray[np.integer], *, all_logits: bool = False) -> npt.NDArray[np.float32] | None: ...
    @property
    def logits(self) -> npt.NDArray[np.float32] | None: ...  # read-only view of the engine's buffer, no copy
    def truncate(self, n_pos: int) -> None: ...
    def reset(self) -> None: ...
    def set_lora(self, lora: "LoRA | None", scale: float = 1.0) -> None: ...
    def kv_stats(self) -> dict[str, Any]: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Session": ...
    def __exit__(self, *exc: object) -> None: ...

class LoRA:
    model: Model
    path: str
    closed: bool
    info: dict[str, Any]
    def __init__(self, model: Model, path: str, *, type: str | None = None) -> None: ...
    def close(self) -> None: ...

class Drafter:  # speculative decoding's drafts (docs/speculative.md)
    model: Model
    kind: Literal["ngram", "self", "model"]
    description: str   # what the engine made, e.g. "self:q4_0 (590 MiB, quantized at load)"
    draft_bytes: int   # the draft model's weight bytes (0 for the lookup)
    draft_max: int
    closed: bool
    def __init__(self, model: Model, spec: str | None = None, *, draft: str | None = None,
                 draft_tokenizer: str | None = None, draft_max: int = 8, draft_min: int = 0, p_min: float = 0.0,
                 adaptive: bool = True, threads: int | None = None) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Drafter": ...
    def __exit__(self, *exc: object) -> None: ...

class Request:
    id: int
    def done(self) -> bool: ...
    def cancel(self) -> None: ...
    def __iter__(self) -> Iterator[str]: ...      # pieces of text as they are generated (blocks)
    def __next__(self) -> str: ...
    def result(self, timeout: float | None = None) -> dict[str, Any]: ...  # blocks; raises TimeoutError
    def __aiter__(self) -> AsyncIterator[str]: ...  # the same, for asyncio
    def __await__(self) -> Any: ...                 # await req -> result()

class Scheduler:
    model: Model
    closed: bool
    def __init__(self, model: Model, *, max_seqs: int = 8, max_batch_tokens: int = 256, max_queue: int = 256,
                 n_ctx: int = 0, threads: int | None = None, aging_ms: int = 1000, chunk: int = 0,
                 prefix_cache: bool = True, kv_type: str = "f32", lora_budget: int = 0,
                 drafter: Drafter | None = None, spec_max_batch: int = 4) -> None: ...
    def submit(self, prompt: Prompt, max_tokens: int = 16, *, temperature: float = 0.8, top_k: int = 40,
               top_p: float = 0.95, min_p: float = 0.05, repeat_penalty: float = 1.0, repeat_last_n: int = 64,
               presence_penalty: float = 0.0, frequency_penalty: float = 0.0, seed: int = 42,
               stop: str | Sequence[str] | None = None, stop_ids: Sequence[int] | None = None,
               ignore_eos: bool = False, priority: int = 0, deadline_ms: int = 0, adapter: str | None = None,
               adapter_scale: float = 1.0, cache_prompt: bool = True,
               on_token: Callable[["Request", int, str], Any] | None = None,
               on_done: Callable[["Request"], Any] | None = None,
               speculate: bool | int | None = None) -> Request: ...
    def add_adapter(self, name: str, path: str, *, preload: bool = True) -> int: ...
    def remove_adapter(self, name: str) -> bool: ...
    def stats(self) -> dict[str, Any]: ...
    def close(self, drain: bool = False) -> None: ...
    def __enter__(self) -> "Scheduler": ...
    def __exit__(self, *exc: object) -> None: ...
