"""`python -m live replay`: replay a workload against any OpenAI-compatible server and measure
it. A client only: it imports no torch (`lint-imports` checks it, rules in pyproject.toml)."""
