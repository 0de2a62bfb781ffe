"""`tgi`: TGI v3's batching, traced by hand against its source.

Source: huggingface/text-generation-inference at db931fcf (3.3.6-dev0, archived read-only in
2026), backends/v3/src/backend.rs `batching_task()` and backends/v3/src/queue.rs
`State::next_batch()`; line numbers are of that commit. Each test steps one engine with no clock
(sim.stepper.run_steps: requests arriving at step k are added before step k is formed) and
asserts the tokens per request in each step, worked out below from the cited lines. Block size 16.
TGI's side is not run here (no GPU, and the archive's router needs its Python shards).
"""

from sim.config import SimConfig, with_overrides
from sim.core.request import RequestSpec
from sim.stepper import run_steps

PLENTY = 20_000


def run(rows, kv_blocks=PLENTY, **knobs):
    """rows = (arrival step, prompt, output); request ids in row order."""
    config = with_overrides(SimConfig(policy="tgi"), knobs)
    specs = [(s, RequestSpec(i, s + i * 1e-3, p, o)) for i, (s, p, o) in enumerate(rows)]
    steps, outputs = run_steps(specs, config, kv_blocks)
    return [step.scheduled for step in steps], outputs


def decode(*ids):
    return dict.fromkeys(ids, 1)


def test_a_new_batch_joins_only_when_it_is_waiting_served_ratio_times_the_running_one():
    rows = [(0, 100, 40), (0, 100, 40), (2, 50, 40), (2, 50, 40)] + [(4, 20, 5)] * 3
    steps, _ = run(rows)
    # Step 0: nothing runs, so next_batch(None, ...) (backend.rs:148-154) takes both; the batch is
    # prefilled (backend.rs:157) and waiting_tokens = 1 (backend.rs:160).
    assert steps[0] == {0: 100, 1: 100}
    # Step 1: the queue is empty, next_batch returns None ("No queue", queue.rs:244-246), so the
    # batch decodes (backend.rs:285) and waiting_tokens becomes 2 (backend.rs:288).
    assert steps[1] == decode(0, 1)
    # Step 2: two arrived. min_size = floor(2 * 1.2) = 2 (backend.rs:194), 2 entries are enough
    # (queue.rs:250-253, :410-418): the new batch is prefilled ALONE (backend.rs:252-253) ...
    assert steps[2] == {2: 50, 3: 50}
    # ... and everybody decodes together right after (backend.rs:285); waiting_tokens was reset
    # to 1 (backend.rs:264) and is 2 after this decode (backend.rs:288).
    assert steps[3] == decode(0, 1, 2, 3)
    # Step 4: three arrive, but min_size = floor(4 * 1.2) = 4 > 3 entries ("Not enough entries",
    # queue.rs:250-253): decode. Before step s waiting_tokens = s - 2, so this holds until
    # waiting_tokens reaches max_waiting_tokens = 20 (backend.rs:186) before step 22.
    for s in range(4, 22):
        assert steps[s] == decode(0, 1, 2, 3), s
    # Step 22: min_size = None (backend.rs:186-189): any batch will do, all three join.
    assert steps[22] == {4: 20, 5: 20, 6: 20}
    assert steps[23] == decode(0, 1, 2, 3, 4, 5, 6)


def test_a_lower_ratio_lets_a_single_request_join():
    # waiting_served_ratio = 0.5: min_size = floor(2 * 0.5) = 1 (backend.rs:194), so the lone
    # request arriving at step 2 is prefilled at once (backend.rs:252-253), then all decode.
    rows = [(0, 100, 10), (0, 100, 10), (2, 30, 4)]
    steps, _ = run(rows, waiting_served_ratio=0.5)
    assert steps[2] == {2: 30}
    assert steps[3] == decode(0, 1, 2)
    # With the default 1.2, min_size = 2 > 1 entry: it waits (queue.rs:250-253).
    steps, _ = run(rows)
    assert steps[2] == decode(0, 1)


def test_max_batch_prefill_tokens_ends_the_batch_at_the_first_prompt_over_it():
    rows = [(0, 100, 3), (0, 100, 3), (0, 100, 3)]
    steps, outputs = run(rows, max_batch_prefill_tokens=256)
    # queue.rs:346: 100 + 100 <= 256, but 200 + 100 > 256 with no chunking: the third goes back to
    # the front and ends the batch (queue.rs:364-372).
    assert steps[0] == {0: 100, 1: 100}
    # Steps 1-2: 1 waiting < min_size floor(2 * 1.2) = 2 (queue.rs:250-253): decode. Requests 0
    # and 1 have their 3 tokens at the end of step 2 (prefill's token + two decodes).
    assert steps[1] == steps[2] == decode(0, 1)
    # Step 3: nothing runs, a new batch without minimum (backend.rs:148-154).
    assert steps[3] == {2: 100}
    assert outputs == {0: 3, 1: 3, 2: 3}


def test_the_prefill_budget_is_padded_to_whole_blocks():
    # queue.rs:265: 200 is padded to 208 (13 blocks of 16), so two prompts of 104 fit together.
    steps, _ = run([(0, 104, 2), (0, 104, 2)], max_batch_prefill_tokens=200)
    assert steps[0] == {0: 104, 1: 104}


def test_a_request_reserves_its_whole_life_of_kv_and_block_0_is_not_usable():
    # queue.rs:315-318: tokens = input_length + max_new_tokens + speculate - 1 = 100 + 13 - 1 =
    # 112, 7 blocks (block_allocator.rs:181). The SimpleAllocator keeps block 0
    # (block_allocator.rs:151-152), so 14 blocks leave 13 free: the second request's 7 do not fit
    # the 6 left (block_allocator.rs:185) and it waits, "not enough free blocks" (queue.rs:321-327).
    rows = [(0, 100, 13), (0, 100, 13)]
    steps, outputs = run(rows, kv_blocks=14)
    assert steps[0] == {0: 100}
    # min_size = floor(1 * 1.2) = 1, but the entry does not fit: decode until request 0 is done
    # (its 13th token at the end of step 12), then a new batch (backend.rs:148-154).
    for s in range(1, 13):
        assert steps[s] == decode(0), s
    assert steps[13] == {1: 100}
    assert outputs == {0: 13, 1: 13}
    # With 15 blocks (14 free) both fit at once.
    steps, _ = run(rows, kv_blocks=15)
    assert steps[0] == {0: 100, 1: 100}


def test_max_batch_size_leaves_no_room_to_join():
    rows = [(0, 50, 3)] * 3
    steps, _ = run(rows, max_batch_size=2, waiting_served_ratio=0.0)
    # queue.rs:397-398: the batch stops at max_size = 2.
    assert steps[0] == {0: 50, 1: 50}
    # max_size = 2 - 2 = 0 (backend.rs:197-198): "No capacity" (queue.rs:257-260), decode.
    assert steps[1] == steps[2] == decode(0, 1)
    assert steps[3] == {2: 50}


def test_max_batch_total_tokens_sizes_the_block_allocator():
    # max_batch_total_tokens = 224: 14 blocks of 16, block 0 kept (block_allocator.rs:151-152),
    # 13 free. Each request needs 100 + 12 - 1 = 111 tokens, 7 blocks (queue.rs:315-318): the
    # second does not fit (block_allocator.rs:185, queue.rs:321-327) though the KV cache is large.
    rows = [(0, 100, 12), (0, 100, 12)]
    steps, _ = run(rows, max_batch_total_tokens=224)
    assert steps[0] == {0: 100}
    for s in range(1, 12):
        assert steps[s] == decode(0), s
    assert steps[12] == {1: 100}
    steps, _ = run(rows, max_batch_total_tokens=240)  # 15 blocks, 14 free: both fit
    assert steps[0] == {0: 100, 1: 100}
