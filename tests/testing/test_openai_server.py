"""The scripted OpenAI-compatible test server, driven by the real openai client."""

from __future__ import annotations

import openai
import pytest

from convcodeworld_gym.testing import Reply, ScriptedOpenAIServer


def _client(server: ScriptedOpenAIServer, **kwargs) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0, **kwargs)


def _ask(client: openai.OpenAI, **kwargs):
    return client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}], **kwargs)


def test_n_choices_and_usage():
    with ScriptedOpenAIServer([Reply(choices=("a", "b", "c"))]) as server:
        out = _ask(_client(server), n=3)
    assert [c.message.content for c in out.choices] == ["a", "b", "c"]
    assert out.usage.total_tokens > 0
    assert server.chat_requests[0]["n"] == 3


def test_errors_slow_and_malformed():
    script = [Reply(status=500), Reply(content="late", delay_s=2.0), Reply(raw_body=b"{not json", status=200)]
    with ScriptedOpenAIServer(script) as server:
        client = _client(server, timeout=0.5)
        with pytest.raises(openai.InternalServerError):
            _ask(client)
        with pytest.raises(openai.APITimeoutError):
            _ask(client)
        with pytest.raises(Exception) as info:
            _ask(client)
        assert not isinstance(info.value, openai.APITimeoutError)
        with pytest.raises(openai.InternalServerError, match="script exhausted"):
            _ask(client)


def test_function_script_sees_request():
    with ScriptedOpenAIServer(lambda body: body["messages"][-1]["content"].upper()) as server:
        assert _ask(_client(server)).choices[0].message.content == "Q"
    assert server.requests[0]["headers"]["authorization"] == "Bearer sk-test"


def test_256_clients_at_once():
    """256 requests in flight together through the real async client, none retried: every one is answered (the
    standard library's listen backlog of 5 reset most of them: 154 of 256 failed before the server's own backlog)."""
    import asyncio

    async def all_at_once(server: ScriptedOpenAIServer) -> list:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0, timeout=60)
        try:
            return await asyncio.gather(*(client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": str(i)}]) for i in range(256)), return_exceptions=True)
        finally:
            await client.close()

    with ScriptedOpenAIServer(lambda body: Reply("re " + body["messages"][0]["content"], delay_s=0.5)) as server:
        answers = asyncio.run(all_at_once(server))
    failed = [a for a in answers if isinstance(a, Exception)]
    assert not failed, f"{len(failed)} of 256 failed, e.g. {failed[0]!r}"
    assert [a.choices[0].message.content for a in answers] == [f"re {i}" for i in range(256)]
    assert len(server.chat_requests) == 256
