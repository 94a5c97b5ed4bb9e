"""Served models: a Django-free client for OpenAI-compatible chat-completion servers (vLLM, SGLang, llama.cpp,
Ollama, hosted APIs), used by in-worker jobs and by node jobs alike."""
