"""The OpenAI-compatible backend against a real HTTP server on 127.0.0.1 speaking that protocol.

The server (mosaic.testing.stub_llm_server) answers from a script: normal replies, HTTP
errors, slow replies and bodies that are not chat completions. Retries, timeouts,
the budget and the record of each call are shown through the real ``openai`` client.
"""

from __future__ import annotations

import socket

import pytest

from mosaic import configkit
from mosaic.errors import ConfigError
from mosaic.llm.backends import (BudgetExhausted, EndpointError, LLMClient, ModelConfig, OpenAIBackend,
                                 check_endpoint, make_client)
from mosaic.testing.stub_llm_server import StubServer

MESSAGES = [{"role": "system", "content": "You play tic-tac-toe."}, {"role": "user", "content": "Your move?"}]


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("MOSAIC_TEST_LLM_KEY", "local")
    return "MOSAIC_TEST_LLM_KEY"


def config_for(server: StubServer, key: str, **fields) -> ModelConfig:
    return configkit.from_dict(ModelConfig, {"base_url": server.base_url, "model": server.model, "api_key_env": key,
                                             "backoff_s": 0.01, **fields})


class Waits(list):
    """Stands in for time.sleep in LLMClient: records the backoff waits instead of spending them."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def test_a_reply_records_tokens_latency_and_cost(key):
    with StubServer(["ACTION: 4"]) as server:
        client = make_client(config_for(server, key, price_input_per_mtok=2.0, price_output_per_mtok=8.0,
                                        max_tokens=32, temperature=0.5))
        reply = client.complete(MESSAGES)
    assert reply.text == "ACTION: 4"
    # the server counts words: 5 in the messages, 2 in the reply
    assert (reply.call.prompt_tokens, reply.call.completion_tokens, reply.call.attempts) == (5, 2, 1)
    assert reply.call.cost == pytest.approx((5 * 2.0 + 2 * 8.0) / 1e6)
    assert reply.call.latency_s > 0 and reply.call.model == "stub-model"
    (sent,) = server.requests  # what went over the wire
    assert sent["messages"] == MESSAGES and sent["max_tokens"] == 32 and sent["temperature"] == 0.5
    assert client.totals() == {"requests": 1, "replies": 1, "prompt_tokens": 5, "completion_tokens": 2,
                               "latency_s": reply.call.latency_s, "cost": reply.call.cost}


def test_server_errors_are_retried_with_doubling_backoff(key):
    waits = Waits()
    with StubServer([{"status": 500}, {"status": 429, "error": "slow down"}, {"status": 503}, "fine"]) as server:
        client = LLMClient(OpenAIBackend(config_for(server, key, max_retries=3, backoff_s=0.5, backoff_max_s=1.5)),
                           config_for(server, key, max_retries=3, backoff_s=0.5, backoff_max_s=1.5), sleep=waits)
        reply = client.complete(MESSAGES)
    assert reply.text == "fine" and reply.call.attempts == 4 and len(server.requests) == 4
    assert waits == [0.5, 1.0, 1.5]  # doubled, capped at backoff_max_s
    assert client.totals()["requests"] == 4 and client.totals()["replies"] == 1


def test_retries_run_out_with_the_last_cause_named(key):
    with StubServer([{"status": 502, "error": "bad gateway"}]) as server:
        client = make_client(config_for(server, key, max_retries=2))
        with pytest.raises(EndpointError) as caught:
            client.complete(MESSAGES)
    assert len(server.requests) == 3
    assert "HTTP 502" in str(caught.value) and "bad gateway" in str(caught.value) and "3 tries" in str(caught.value)


def test_a_slow_reply_times_out_and_the_retry_gets_the_next_one(key):
    with StubServer([{"text": "late", "delay_s": 1.5}, "in time"]) as server:
        client = make_client(config_for(server, key, timeout_s=0.3, max_retries=1))
        reply = client.complete(MESSAGES)
    assert reply.text == "in time" and reply.call.attempts == 2


def test_a_timeout_on_every_try_names_the_setting(key):
    with StubServer([{"text": "late", "delay_s": 1.0}]) as server:
        client = make_client(config_for(server, key, timeout_s=0.2, max_retries=0))
        with pytest.raises(EndpointError, match=r"no reply within 0.2 s \(model.timeout_s\)"):
            client.complete(MESSAGES)


def test_a_rejected_key_is_not_retried(key):
    with StubServer([{"status": 401, "error": "invalid api key"}]) as server:
        client = make_client(config_for(server, key, max_retries=3))
        with pytest.raises(EndpointError, match="HTTP 401: invalid api key.*model.api_key_env"):
            client.complete(MESSAGES)
    assert len(server.requests) == 1


def test_an_answer_that_is_not_a_chat_completion_is_an_error(key):
    with StubServer([{"raw": "<html>proxy error</html>"}]) as server:
        client = make_client(config_for(server, key, max_retries=0))
        with pytest.raises(EndpointError, match="malformed answer"):
            client.complete(MESSAGES)


def test_the_request_budget_stops_before_sending(key):
    with StubServer(["one", {"status": 500}, "two"]) as server:
        client = make_client(config_for(server, key, max_requests=3))
        client.complete(MESSAGES)
        client.complete(MESSAGES)  # a 500, then "two": three requests sent
        with pytest.raises(BudgetExhausted, match="budget of 3 requests.*model.max_requests"):
            client.complete(MESSAGES)
    assert len(server.requests) == 3


def test_the_token_budget_stops_before_sending(key):
    with StubServer(["a reply of six words here"]) as server:
        client = make_client(config_for(server, key, max_tokens_total=20))
        client.complete(MESSAGES)  # 5 + 6 tokens: 11
        client.complete(MESSAGES)  # 22: this reply may pass the budget, no later request is sent
        with pytest.raises(BudgetExhausted, match=r"budget of 20 tokens is spent \(22 used"):
            client.complete(MESSAGES)
    assert len(server.requests) == 2 and client.totals()["prompt_tokens"] == 10


def test_checks_before_a_run_name_the_field(monkeypatch, key):
    monkeypatch.delenv("NO_SUCH_KEY_VARIABLE", raising=False)
    with StubServer(["x"]) as server:
        check_endpoint(config_for(server, key))  # key set, server listening: fine
        with pytest.raises(ConfigError, match="model.api_key_env: the environment variable 'NO_SUCH_KEY_VARIABLE'"):
            check_endpoint(config_for(server, "NO_SUCH_KEY_VARIABLE"))
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    unreachable = ModelConfig(base_url=f"http://127.0.0.1:{port}/v1", api_key_env=key)
    with pytest.raises(ConfigError, match=rf"model.base_url: nothing answers at 127.0.0.1:{port}"):
        check_endpoint(unreachable)
    with pytest.raises(ConfigError, match="model.base_url: 'localhost:8000' is not an http"):
        check_endpoint(ModelConfig(base_url="localhost:8000", api_key_env=key))


def test_the_config_explains_and_validates_itself():
    with pytest.raises(ConfigError, match="backend: 'claude-direct' is not one of openai"):
        configkit.from_dict(ModelConfig, {"backend": "claude-direct"})
    with pytest.raises(ConfigError, match="temperature"):
        configkit.from_dict(ModelConfig, {"temperature": 3.0})
    schema = configkit.json_schema(ModelConfig)
    assert {"base_url", "model", "api_key_env", "max_requests", "max_tokens_total"} <= set(schema["properties"])
