"""Language models as players: what the LLM workers share.

- :mod:`mosaic.llm.backends`: one small interface over model endpoints (an
  OpenAI-compatible HTTP API, which reaches OpenAI, vLLM, llama.cpp's server,
  Ollama and most hosted models), with timeouts, retries with backoff, a per-run
  budget of requests and tokens, and every call's tokens, latency and cost recorded.
- :mod:`mosaic.llm.actions`: an action read from a reply; a reply that names no
  legal action is asked again, then replaced by a random legal action and counted.
- :mod:`mosaic.testing.stub_llm_server`: a local server speaking the same HTTP protocol with
  scripted replies (malformed, slow, failing), for tests and offline runs.

Nothing here is imported by ``import mosaic``; the ``openai`` package is needed only
when an OpenAI-compatible backend is built (the ``llm`` extra).
"""
