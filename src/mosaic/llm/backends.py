"""Model endpoints behind one small interface, with retries, a budget and a record of every call.

A **backend** turns chat messages into reply text and token counts, and sorts its
failures into two kinds: :class:`TransientError` (timeout, connection refused,
HTTP 429 or 5xx: worth another try) and :class:`EndpointError` (anything else: a
wrong key, an unknown model, a malformed answer). :class:`LLMClient` wraps a
backend with what every run needs:

- retries of transient failures with exponential backoff (``backoff_s``, doubled
  each time up to ``backoff_max_s``), at most ``max_retries`` after the first try;
- a per-run budget: ``max_requests`` (every request sent counts, retries too) and
  ``max_tokens_total`` (prompt plus completion tokens of the replies). A reply's size
  is known only once it came, so the reply that reaches the token budget may pass it;
  no request is sent after that, and :class:`BudgetExhausted` says which limit;
- one :class:`Call` per reply: tokens, latency, tries and, when prices are given, cost.

:class:`OpenAIBackend` speaks the OpenAI chat-completions protocol through the
``openai`` package, so one config reaches OpenAI, vLLM, llama.cpp's server, Ollama
and most hosted models: ``base_url``, ``model``, and the *name* of the environment
variable that holds the key (the key itself never enters a config or a run folder).
:class:`TransformersBackend` loads a local model directory with ``transformers``
(in a worker's environment that has it) and generates on CPU.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol
from urllib.parse import urlsplit

from mosaic.configkit import option
from mosaic.errors import ConfigError

BACKENDS = ("openai", "transformers")


@dataclass
class ModelConfig:
    """Which model answers, how long to wait for it, and how much a run may spend."""

    backend: str = option("openai", choices=BACKENDS,
                          help="openai: any OpenAI-compatible HTTP endpoint (OpenAI, vLLM, llama.cpp, Ollama); "
                               "transformers: a model directory loaded in the worker's process (CPU)")
    base_url: str = option("https://api.openai.com/v1", help="the endpoint's base URL, up to and including /v1 "
                                                             "(openai backend)")
    model: str = option("gpt-4o-mini", help="the model's name as the endpoint knows it; for the transformers "
                                            "backend, the model directory (config, weights, tokenizer)")
    api_key_env: str = option("OPENAI_API_KEY", help="name of the environment variable holding the API key "
                                                     "(a local server takes any non-empty value)")
    timeout_s: float = option(60.0, min=0.1, help="seconds to wait for one reply (transformers: generation "
                                                  "stops there, and the reply is what was generated)")
    max_retries: int = option(3, min=0, help="tries after the first for timeouts, refused connections, 429 and 5xx")
    backoff_s: float = option(1.0, min=0.0, help="wait before the first retry; doubles with each retry")
    backoff_max_s: float = option(30.0, min=0.0, help="longest wait between two tries")
    max_tokens: int = option(256, min=1, help="completion tokens per reply")
    temperature: float = option(0.0, min=0.0, max=2.0, help="sampling temperature (0: the likeliest reply)")
    max_requests: int | None = option(None, min=1, help="per-run budget: requests sent, retries included")
    max_tokens_total: int | None = option(None, min=1, help="per-run budget: prompt plus completion tokens")
    price_input_per_mtok: float | None = option(None, min=0.0, help="price of a million prompt tokens, for cost")
    price_output_per_mtok: float | None = option(None, min=0.0, help="price of a million completion tokens")


# -- what a call leaves behind ----------------------------------------------------------------
@dataclass
class Call:
    """One reply, as recorded: tokens, seconds, tries, and cost when prices are known."""

    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    attempts: int
    cost: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Reply:
    text: str
    call: Call


class LLMError(Exception):
    """The model could not answer; the message says why, naming the endpoint."""


class TransientError(LLMError):
    """A failure another try may not have: timeout, refused connection, 429, 5xx."""


class EndpointError(LLMError):
    """A failure another try will have too (bad key, unknown model, malformed answer), or retries ran out."""


class BudgetExhausted(LLMError):
    """The run's budget of requests or tokens cannot pay for another request."""


class Backend(Protocol):
    """Chat messages in; reply text and (prompt, completion) token counts out."""

    model: str

    def complete(self, messages: list[dict[str, str]], max_tokens: int,
                 temperature: float) -> tuple[str, int, int]: ...


# -- budget, retries -------------------------------------------------------------------------
@dataclass
class Budget:
    max_requests: int | None = None
    max_tokens: int | None = None
    requests: int = 0
    tokens: int = 0

    def check(self) -> None:
        if self.max_requests is not None and self.requests >= self.max_requests:
            raise BudgetExhausted(f"the run's budget of {self.max_requests} requests is spent "
                                  "(model.max_requests)")
        if self.max_tokens is not None and self.tokens >= self.max_tokens:
            raise BudgetExhausted(f"the run's budget of {self.max_tokens} tokens is spent "
                                  f"({self.tokens} used; model.max_tokens_total)")


@dataclass
class LLMClient:
    """A backend with retries, a budget and a record of its calls (see the module's doc)."""

    backend: Backend
    config: ModelConfig
    sleep: Callable[[float], None] = time.sleep
    calls: list[Call] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.budget = Budget(self.config.max_requests, self.config.max_tokens_total)

    def complete(self, messages: list[dict[str, str]]) -> Reply:
        cfg = self.config
        wait = cfg.backoff_s
        last: TransientError | None = None
        for attempt in range(1, cfg.max_retries + 2):
            self.budget.check()
            self.budget.requests += 1
            started = time.monotonic()
            try:
                text, prompt_tokens, completion_tokens = self.backend.complete(messages, cfg.max_tokens,
                                                                               cfg.temperature)
            except TransientError as exc:
                last = exc
                if attempt <= cfg.max_retries:
                    self.sleep(min(wait, cfg.backoff_max_s))
                    wait *= 2
                continue
            call = Call(model=self.backend.model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                        latency_s=round(time.monotonic() - started, 4), attempts=attempt,
                        cost=self._cost(prompt_tokens, completion_tokens))
            self.budget.tokens += prompt_tokens + completion_tokens
            self.calls.append(call)
            return Reply(text, call)
        raise EndpointError(f"{last} (gave up after {cfg.max_retries + 1} tries; model.max_retries)")

    def _cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        cfg = self.config
        if cfg.price_input_per_mtok is None and cfg.price_output_per_mtok is None:
            return None
        return round((prompt_tokens * (cfg.price_input_per_mtok or 0.0)
                      + completion_tokens * (cfg.price_output_per_mtok or 0.0)) / 1e6, 8)

    def totals(self) -> dict[str, Any]:
        """What the run spent: requests sent, replies, tokens, seconds waiting, cost."""
        costs = [c.cost for c in self.calls if c.cost is not None]
        return {"requests": self.budget.requests, "replies": len(self.calls),
                "prompt_tokens": sum(c.prompt_tokens for c in self.calls),
                "completion_tokens": sum(c.completion_tokens for c in self.calls),
                "latency_s": round(sum(c.latency_s for c in self.calls), 4),
                "cost": round(sum(costs), 8) if costs else None}


# -- the OpenAI-compatible backend -----------------------------------------------------------
class OpenAIBackend:
    """Chat completions over HTTP with the ``openai`` package; its own retries are off (ours count)."""

    def __init__(self, config: ModelConfig) -> None:
        import openai

        self._openai = openai
        self.model = config.model
        self.base_url = config.base_url
        self.timeout_s = config.timeout_s
        self.client = openai.OpenAI(base_url=config.base_url, api_key=api_key(config),
                                    timeout=config.timeout_s, max_retries=0)

    def complete(self, messages: list[dict[str, str]], max_tokens: int, temperature: float) -> tuple[str, int, int]:
        openai = self._openai
        where = f"{self.base_url} ({self.model})"
        try:
            response = self.client.chat.completions.create(model=self.model, messages=messages,
                                                           max_tokens=max_tokens, temperature=temperature)
        except openai.APITimeoutError:
            raise TransientError(f"{where}: no reply within {self.timeout_s:g} s (model.timeout_s)") from None
        except openai.APIConnectionError as exc:
            raise TransientError(f"{where}: unreachable ({exc.__cause__ or exc})") from None
        except (openai.RateLimitError, openai.InternalServerError) as exc:
            raise TransientError(f"{where}: HTTP {exc.status_code}: {_message(exc)}") from None
        except openai.APIStatusError as exc:
            hint = " (check the key in the variable model.api_key_env names)" if exc.status_code in (401, 403) else ""
            raise EndpointError(f"{where}: HTTP {exc.status_code}: {_message(exc)}{hint}") from None
        except openai.APIError as exc:  # an answer that is not a chat completion
            raise EndpointError(f"{where}: malformed answer: {exc}") from None
        choices = getattr(response, "choices", None)
        if not choices or getattr(choices[0], "message", None) is None:
            raise EndpointError(f"{where}: malformed answer: no choices in {str(response)[:200]!r}")
        text = choices[0].message.content or ""
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        return text, prompt_tokens, completion_tokens


# -- a local model directory ------------------------------------------------------------------
class TransformersBackend:
    """A causal language model loaded from a local directory with ``transformers``, generating on CPU.

    The prompt is the tokenizer's chat template when it has one, else the messages as
    ``role: content`` lines; temperature 0 decodes greedily (the same prompt gives
    the same reply). ``timeout_s`` becomes ``generate``'s ``max_time``. Nothing is
    downloaded: the directory must hold the model and its tokenizer.
    """

    def __init__(self, config: ModelConfig) -> None:
        check_model_dir(config)
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer

        transformers.utils.logging.set_verbosity_error()  # no progress bars on the worker's stderr
        transformers.utils.logging.disable_progress_bar()
        self._torch = torch
        self.model = config.model
        self.timeout_s = config.timeout_s
        self.tokenizer = AutoTokenizer.from_pretrained(config.model, local_files_only=True)
        self.network = AutoModelForCausalLM.from_pretrained(config.model, local_files_only=True)
        self.network.eval()

    def prompt(self, messages: list[dict[str, str]]) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:"

    def complete(self, messages: list[dict[str, str]], max_tokens: int, temperature: float) -> tuple[str, int, int]:
        inputs = self.tokenizer(self.prompt(messages), return_tensors="pt")
        prompt_tokens = int(inputs["input_ids"].shape[1])
        limit = getattr(self.network.config, "max_position_embeddings", None) or getattr(
            self.network.config, "n_positions", None)
        if limit is not None and prompt_tokens + max_tokens > limit:
            raise EndpointError(f"{self.model}: a prompt of {prompt_tokens} tokens plus {max_tokens} to generate "
                                f"exceeds the model's {limit} positions (fewer `history` turns, or model.max_tokens)")
        sampling = {"do_sample": True, "temperature": temperature} if temperature > 0 else {"do_sample": False}
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        with self._torch.no_grad():
            output = self.network.generate(**inputs, max_new_tokens=max_tokens, max_time=self.timeout_s,
                                           pad_token_id=pad, **sampling)
        new = output[0, prompt_tokens:]
        return self.tokenizer.decode(new, skip_special_tokens=True), prompt_tokens, int(new.shape[0])


def check_model_dir(config: ModelConfig, path: str = "model") -> None:
    folder = Path(config.model).expanduser()
    if not (folder / "config.json").is_file():
        raise ConfigError(f"{path}.model", f"{config.model!r} is not a model directory (no config.json in it): the "
                                           "transformers backend loads a local directory, nothing is downloaded")


def _message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(getattr(exc, "message", exc))


# -- checks before a run starts --------------------------------------------------------------
def api_key(config: ModelConfig, field_path: str = "model.api_key_env") -> str:
    key = os.environ.get(config.api_key_env, "")
    if not key:
        raise ConfigError(field_path, f"the environment variable {config.api_key_env!r} is not set: put the "
                                      "endpoint's API key there (a local server takes any non-empty value), or "
                                      "name another variable")
    return key


def check_endpoint(config: ModelConfig, path: str = "model", connect_timeout_s: float = 5.0) -> None:
    """Refuse, before a run starts, a config whose key is missing or whose endpoint nobody answers at
    (for the transformers backend: whose model directory is not one).

    Only a TCP connection is tried (every OpenAI-compatible server accepts one; not all
    of them list their models), so this costs no request and no token.
    """
    if config.backend == "transformers":
        check_model_dir(config, path)
        return
    api_key(config, f"{path}.api_key_env")
    parts = urlsplit(config.base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{path}.base_url", f"{config.base_url!r} is not an http(s) URL, "
                                              "e.g. http://127.0.0.1:8000/v1")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=connect_timeout_s):
            pass
    except OSError as exc:
        raise ConfigError(f"{path}.base_url", f"nothing answers at {parts.hostname}:{port} "
                                              f"({exc.strerror or exc}): is the server running?") from None


def make_client(config: ModelConfig, **kwargs: Any) -> LLMClient:
    """The client for ``config.backend``."""
    if config.backend == "openai":
        return LLMClient(OpenAIBackend(config), config, **kwargs)
    if config.backend == "transformers":
        return LLMClient(TransformersBackend(config), config, **kwargs)
    raise ConfigError("model.backend", f"{config.backend!r} is not one of {', '.join(BACKENDS)}")
