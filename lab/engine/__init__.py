"""The real CPU vLLM engine (cached venv) and the tiny local model it serves."""
