"""`python -m live serve`: an OpenAI-compatible server (ASGI) around the live engine."""
