"""Cortex: a CPU inference engine for Llama-family models, from Python.

    import cortex
    m = cortex.Model("model.gguf")
    print(m.generate("Once upon a time", max_tokens=32, temperature=0).text)

The work happens in the C library (engine/include/cortex.h), called with the
GIL released; this package adds the OpenAI-shaped conveniences that
llama-cpp-python's `Llama` offers (create_completion, create_chat_completion)
so code written for it runs. docs/python.md is the guide; every class has a
manual in help().

Classes: Model, Session (low level: eval, logits as a zero-copy numpy view,
truncate), LoRA, Drafter (speculative decoding's drafts), Scheduler and
Request (many requests at once, continuous batching), Generation and Stream
(generate()'s results). Errors: Error and
one subclass per engine error code.
"""
import time as _time
import uuid as _uuid

from . import _cortex
from ._cortex import (BusyError, ContextFullError, Drafter, Error, FileError, FormatError, Generation,
                      InvalidArgumentError, LoRA, OutOfMemoryError, RangeError, Request, Scheduler, Session, Stream,
                      UnsupportedError, cpu_features, isa, quantize, shapes, synth)

__version__ = "0.1.0"
__all__ = ["Model", "Session", "LoRA", "Drafter", "Scheduler", "Request", "Generation", "Stream", "Error", "FileError",
           "FormatError", "RangeError", "UnsupportedError", "InvalidArgumentError", "OutOfMemoryError",
           "ContextFullError", "BusyError", "cpu_features", "isa", "shapes", "synth", "quantize"]

# Keyword arguments of llama-cpp-python's calls that change nothing here
# (accepted so its code runs; listed so a misspelt one still fails).
_IGNORED = {"suffix", "logprobs", "top_logprobs", "tfs_z", "mirostat_mode", "mirostat_tau", "mirostat_eta",
            "typical_p", "stopping_criteria", "logits_processor", "grammar", "logit_bias", "model", "response_format",
            "tools", "tool_choice", "functions", "function_call", "user", "n", "stream_options"}


def _check_ignored(kw):
    bad = sorted(set(kw) - _IGNORED)
    if bad:
        raise TypeError("unexpected keyword argument(s): " + ", ".join(bad))


class Model(_cortex.Model):
    __doc__ = _cortex.Model.__doc__

    def _gen_args(self, max_tokens, temperature, top_p, min_p, stop, seed, top_k, repeat_penalty, presence_penalty,
                  frequency_penalty, lora):
        # llama-cpp-python: max_tokens None or <= 0 means "until the context is full"
        return dict(max_tokens=max_tokens if max_tokens is not None and max_tokens > 0 else 2**31 - 1,
                    temperature=temperature, top_p=top_p, min_p=min_p, stop=stop, seed=seed, top_k=top_k,
                    repeat_penalty=repeat_penalty, presence_penalty=presence_penalty,
                    frequency_penalty=frequency_penalty, lora=lora)

    def _head(self, kind):
        return {"id": ("cmpl-" if kind == "text_completion" else "chatcmpl-") + _uuid.uuid4().hex,
                "object": kind, "created": int(_time.time()), "model": self.path}

    def create_completion(self, prompt, max_tokens=16, temperature=0.8, top_p=0.95, min_p=0.05, stop=None,
                          stream=False, seed=None, top_k=40, repeat_penalty=1.0, presence_penalty=0.0,
                          frequency_penalty=0.0, echo=False, lora=None, **ignored):
        """create_completion(prompt, max_tokens=16, temperature=0.8, top_p=0.95, min_p=0.05, stop=None,
        stream=False, seed=None, top_k=40, repeat_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0,
        echo=False, lora=None) -> dict | iterator of dicts

        OpenAI's text_completion object, as llama-cpp-python's Llama.create_completion returns it (stream=True:
        its chunks). max_tokens None or <= 0: until the context is full. seed None: the engine's fixed default.
        """
        _check_ignored(ignored)
        args = self._gen_args(max_tokens, temperature, top_p, min_p, stop, seed, top_k, repeat_penalty,
                              presence_penalty, frequency_penalty, lora)
        head = self._head("text_completion")
        prefix = prompt if echo and isinstance(prompt, str) else ""
        if stream:
            return self._completion_chunks(prompt, args, head, prefix)
        g = self.generate(prompt, **args)
        return dict(head, choices=[{"text": prefix + g.text, "index": 0, "logprobs": None,
                                    "finish_reason": g.finish_reason}],
                    usage=_usage(g))

    def _completion_chunks(self, prompt, args, head, prefix):
        st = self.generate(prompt, stream=True, **args)
        if prefix:
            yield dict(head, choices=[{"text": prefix, "index": 0, "logprobs": None, "finish_reason": None}])
        for piece in st:
            yield dict(head, choices=[{"text": piece, "index": 0, "logprobs": None, "finish_reason": None}])
        yield dict(head, choices=[{"text": "", "index": 0, "logprobs": None,
                                   "finish_reason": st.result.finish_reason}])

    __call__ = create_completion

    def create_chat_completion(self, messages, max_tokens=None, temperature=0.8, top_p=0.95, min_p=0.05, stop=None,
                               stream=False, seed=None, top_k=40, repeat_penalty=1.0, presence_penalty=0.0,
                               frequency_penalty=0.0, lora=None, **ignored):
        """create_chat_completion(messages, max_tokens=None, temperature=0.8, top_p=0.95, min_p=0.05, stop=None,
        stream=False, seed=None, top_k=40, repeat_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0,
        lora=None) -> dict | iterator of dicts

        OpenAI's chat.completion object (stream=True: chat.completion.chunk objects), as llama-cpp-python returns
        it. The prompt is apply_chat_template(messages); the format's end-of-turn texts are stop strings. A gpt-oss
        (harmony) answer is split as the server does: the final channel is the content, the analysis channel
        message["reasoning_content"].
        """
        _check_ignored(ignored)
        prompt = self.apply_chat_template(messages)
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        args = self._gen_args(max_tokens, temperature, top_p, min_p, stops + self.chat_stop, seed, top_k,
                              repeat_penalty, presence_penalty, frequency_penalty, lora)
        head = self._head("chat.completion" if not stream else "chat.completion.chunk")
        if stream:
            return self._chat_chunks(prompt, args, head)
        g = self.generate(prompt, **args)
        message = {"role": "assistant", "content": g.text}
        if self.chat_template == "gpt-oss":
            content, reasoning = _cortex.harmony_split(g.text)
            if content is not None:
                message["content"] = content
                if reasoning is not None:
                    message["reasoning_content"] = reasoning
        return dict(head, choices=[{"index": 0, "message": message, "logprobs": None,
                                    "finish_reason": g.finish_reason}],
                    usage=_usage(g))

    def _chat_chunks(self, prompt, args, head):
        st = self.generate(prompt, stream=True, **args)
        yield dict(head, choices=[{"index": 0, "delta": {"role": "assistant"}, "logprobs": None,
                                   "finish_reason": None}])
        for piece in st:
            yield dict(head, choices=[{"index": 0, "delta": {"content": piece}, "logprobs": None,
                                       "finish_reason": None}])
        yield dict(head, choices=[{"index": 0, "delta": {}, "logprobs": None,
                                   "finish_reason": st.result.finish_reason}])


def _usage(g):
    return {"prompt_tokens": g.n_prompt, "completion_tokens": g.n_gen, "total_tokens": g.n_prompt + g.n_gen}
