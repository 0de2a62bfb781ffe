"""PD Lab's live engine: a real model in plain PyTorch that runs the simulator's schedules.

The rooms (`lint-imports` checks the rules, in pyproject.toml):
- `model/`: the torch model: a Llama-style decoder with one mixed prefill+decode forward pass,
  its attention layouts, the K/V store, CUDA graphs for decode steps, weights and tokenizer.
- `engine/`: the simulator's policies on that model: the runner that executes and times a
  policy's Batch, the measured clock, `run_live`, calibration, sim-vs-live comparison,
  recordings and the small live workloads.
- `serve/`: `python -m live serve`, an OpenAI-compatible HTTP server around the engine.
- `replay/`: `python -m live replay`, a client that replays a workload against any
  OpenAI-compatible server. It never imports torch.
- `cli.py`: `python -m live`.

Nothing in sim/ imports live/; live/ imports sim/ (the Batch a policy produces). torch is
imported only inside live/model, live/engine and live/serve (and their tests and benches).
"""
