"""Inference engines behind one small interface (agent.engine.base.Engine).

Only llama.cpp is here (agent.engine.llama: llama-cpp-python in a sandboxed process of its
own); an engine for a vLLM or Ollama endpoint would implement the same three methods.
"""
