"""Fake model providers that speak the real HTTP wire protocols, for tests and benchmarks.

- `tests.wire.openai_server.FakeOpenAIServer`: Chat Completions (JSON and SSE).
- `tests.wire.anthropic_server.FakeAnthropicServer`: Messages (JSON and SSE).
- `tests.wire.scripted_server`: what a test scripts (`Reply`, `ToolCall`, `ErrorReply`,
  `RawReply`) and the recorded requests.
- `tests.wire.fixtures`: pytest fixtures (one server per session, reset and verified per test).
"""
