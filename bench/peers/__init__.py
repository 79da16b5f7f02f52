"""The peers benchmark: Pressloop against LangGraph, the OpenAI Agents SDK and Pydantic AI
(`python -m bench.peers`)."""
