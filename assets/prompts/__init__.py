"""Prompts, one module per stage. Each builds chat messages; shared context goes first so a
server with prompt-prefix caching (llama.cpp) reads it once for many calls."""
