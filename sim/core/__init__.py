"""The engine core of one worker: requests, KV blocks (plain and prefix-cached), the engine's
queues and step bookkeeping, the recorder and the data contract every run yields.

Nothing here knows about clocks, topologies or event speed: `sim.fastforward` builds on this
package, never the other way round (`lint-imports`, rules in pyproject.toml).
"""
