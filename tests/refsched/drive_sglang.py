"""Drive SGLang's REAL Scheduler (sglang==0.5.23) step by step on a CPU, GPU kernels stubbed.

Runs inside ``.venv-sglang`` (see ``scripts/refsched_env.sh``), never in the app's venv. Same
JSON protocol as the vLLM drivers (``tests/refsched/client.py``), with SGLang's own knobs in
``config``: chunked_prefill_size, max_prefill_tokens, max_running_requests,
enable_mixed_chunk, disable_radix_cache, schedule_policy, page_size, max_total_tokens, and
ignore_eos (False: the fake token is never EOS, so such a request still yields max_tokens,
but SGLang reserves its future output by new_token_ratio, and retracts when that runs out).

Provenance: adapted from ``../shared/reference/probes/sglang/drive_sglang.py`` (PD Lab's probe).
The Scheduler is built by its own ``__init__`` (CPU engine, dummy weights, the tiny Llama config
in ``sglang/tinymodel/``); the ModelRunner's weight loading, attention backends, CUDA graphs,
forward and sampling are replaced by stand-ins (the cut SGLang's own tools/sglang-simulator
makes). ``sglang/stubs/`` holds stand-ins for ``sgl_kernel`` (plus its pure-python
``scalar_type.py`` from sglang-kernel 0.4.10, Apache-2.0) and ``torchvision``. Each step runs
the body of ``Scheduler.event_loop_normal`` (scheduler.py): get_next_batch_to_run ->
run_batch -> process_batch_result (overlap scheduling off).

Per step: ``scheduled`` = rid -> tokens (a prefill chunk's ``extend_len``, 1 for a decode),
``cached`` = radix-cache hit (``prefix_len``) of a request's first chunk, ``preempted`` = rids
``ScheduleBatch.retract_decode`` returned while the step was formed.
"""

from __future__ import annotations

import os
import sys
from array import array
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "sglang" / "stubs"))
os.environ["SGLANG_USE_CPU_ENGINE"] = "1"
os.environ["CUDA_VISIBLE_DEVICES"] = ""

from protocol import serve  # noqa: E402

ENGINE = "sglang 0.5.23"
MODEL_DIR = str(HERE / "sglang" / "tinymodel")
FAKE_TOKEN = 7  # never the eos id (2); requests also use ignore_eos


def _imports():
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import torch
    from sglang.srt.managers import schedule_batch as sb_mod
    from sglang.srt.mem_cache import kv_cache_configurator as kvc_mod
    from sglang.srt.model_executor import model_runner as mr_mod

    MR = mr_mod.ModelRunner  # noqa: N806

    class _MockModel(torch.nn.Module):
        def forward(self, *a, **k):
            return None

    def _load_model(self):
        self.model = _MockModel()
        self.dtype = self.model_config.dtype
        self.sliding_window_size = None
        self.prefill_aware_swa = False
        self.weight_load_mem_usage = 0
        self.load_config = None

        class _L:
            preloaded_weights_bytes = 0

        self.loader = _L()

    def _init_attention_backends(self):
        self.prefill_attention_backend_str = self.server_args.attention_backend or "torch_native"
        self.decode_attention_backend_str = self.prefill_attention_backend_str
        self.attn_backend = None
        self.decode_attn_backend = None
        self.decode_attn_backend_group = None

    def _init_cuda_graphs(self, capture_decode_cuda_graph=True):
        self.graph_mem_usage = 0
        self.cuda_graph_runner = None
        self.eager_runner = None
        self.prefill_cuda_graph_runner = None
        self.decode_cuda_graph_runner = None

    def _forward(self, forward_batch, *a, **k):
        from sglang.srt.layers.logits_processor import LogitsProcessorOutput

        out = LogitsProcessorOutput(
            next_token_logits=torch.zeros((forward_batch.batch_size, 8), device=self.device)
        )
        return mr_mod.ModelRunnerOutput(logits_output=out, can_run_graph=False)

    def _sample(self, logits_output, *a, **k):
        n = logits_output.next_token_logits.shape[0]
        return torch.full((n,), FAKE_TOKEN, dtype=torch.int64, device=self.device)

    MR.load_model = _load_model
    MR.init_attention_backends = _init_attention_backends
    MR.init_cuda_graphs = _init_cuda_graphs
    MR.forward = _forward
    MR.sample = _sample
    MR.compute_logprobs_only = lambda self, *a, **k: None
    kvc_mod.KVCacheConfigurator._profile_available_bytes = lambda self, pre: 256 << 20

    # Record retractions: ScheduleBatch.retract_decode returns (retracted reqs, ratio, ...).
    retracted: list = []
    orig = sb_mod.ScheduleBatch.retract_decode

    def retract_decode(self, *a, **k):
        out = orig(self, *a, **k)
        retracted.extend(r.rid for r in out[0])
        return out

    sb_mod.ScheduleBatch.retract_decode = retract_decode

    from sglang.srt.managers.io_struct import TokenizedGenerateReqInput
    from sglang.srt.managers.scheduler import Scheduler
    from sglang.srt.runtime_context import SpawnRanks, publish
    from sglang.srt.sampling.sampling_params import SamplingParams
    from sglang.srt.server_args import PortArgs, ServerArgs

    return dict(
        TokenizedGenerateReqInput=TokenizedGenerateReqInput,
        Scheduler=Scheduler,
        SpawnRanks=SpawnRanks,
        publish=publish,
        SamplingParams=SamplingParams,
        PortArgs=PortArgs,
        ServerArgs=ServerArgs,
        retracted=retracted,
    )


def _teardown():
    from sglang.srt.distributed import parallel_state as ps

    ps.destroy_model_parallel()
    ps.destroy_distributed_environment()


def _make_req(m, rid, ids, max_new_tokens, ignore_eos=True):
    sp = m["SamplingParams"](max_new_tokens=max_new_tokens, ignore_eos=ignore_eos, temperature=0.0)
    sp.normalize(None)
    return m["TokenizedGenerateReqInput"](
        rid=rid,
        input_text=None,
        input_ids=array("q", ids),
        input_embeds=None,
        mm_inputs=None,
        token_type_ids=None,
        sampling_params=sp,
        return_logprob=False,
        logprob_start_len=-1,
        top_logprobs_num=0,
        token_ids_logprob=None,
        stream=False,
    )


def run_case(m, case: dict) -> dict:
    c = case["config"]
    args = dict(
        model_path=MODEL_DIR,
        device="cpu",
        skip_tokenizer_init=True,
        load_format="dummy",
        disable_overlap_schedule=True,  # the synchronous event_loop_normal
        disable_cuda_graph=True,
        attention_backend="torch_native",
        random_seed=0,
        log_level="error",
        max_total_tokens=c["max_total_tokens"],
        chunked_prefill_size=c["chunked_prefill_size"],
        max_prefill_tokens=c["max_prefill_tokens"],
        enable_mixed_chunk=c["enable_mixed_chunk"],
        disable_radix_cache=c["disable_radix_cache"],
        schedule_policy=c["schedule_policy"],
        page_size=c["page_size"],
    )
    if c.get("max_running_requests"):
        args["max_running_requests"] = c["max_running_requests"]
    sa = m["ServerArgs"](**args)
    pa = m["PortArgs"].init_new(sa)
    m["publish"](sa, role="scheduler", ranks=m["SpawnRanks"](world_rank=0, dp_rank=None, gpu_id=0))
    s = m["Scheduler"](sa, pa)
    try:
        return _run(m, s, case)
    finally:
        _teardown()


def _run(m, s, case):
    c = case["config"]
    pending = sorted(case["requests"], key=lambda r: r["arrival_step"])
    seen = {}
    steps = []
    retracted = m["retracted"]
    admitted = set()
    total = len(pending)
    for k in range(case.get("max_steps", 20000)):
        if (
            not pending
            and len(seen) == total
            and all(r.finished() for r in seen.values())
            and not s.waiting_queue
        ):
            break  # as sim.stepper.run_steps: no step once every request finished
        while pending and pending[0]["arrival_step"] <= k:
            r = pending.pop(0)
            s.handle_generate_request(
                _make_req(m, r["id"], r["prompt_token_ids"], r["max_tokens"], c["ignore_eos"])
            )
        retracted.clear()
        plan = s.get_next_batch_to_run(running_batch=s.running_batch, last_batch=s.last_batch)
        s.running_batch = plan.running_batch
        batch = plan.batch_to_run
        step = {"scheduled": {}, "cached": {}, "preempted": list(retracted), "finished": []}
        for rid in retracted:
            admitted.discard(rid)
        if batch:
            decoding = {id(r) for r in (batch.decoding_reqs or [])}
            for r in batch.reqs:
                seen[r.rid] = r
                if id(r) in decoding or batch.forward_mode.is_decode():
                    step["scheduled"][r.rid] = 1
                else:
                    step["scheduled"][r.rid] = r.extend_len
                    if r.rid not in admitted:
                        admitted.add(r.rid)
                        if r.prefix_len:
                            step["cached"][r.rid] = r.prefix_len
            result = s.run_batch(batch)
            s.process_batch_result(batch, result)
            step["finished"] = [r.rid for r in batch.reqs if r.finished()]
        elif s.is_fully_idle():
            # event_loop_normal -> on_idle (scheduler.py 2050-2053, 5241-5320): a fully idle
            # server resets new_token_ratio (the rest of on_idle is health checks and metrics).
            s.new_token_ratio_tracker.reset()
        s.last_batch = batch
        steps.append(step)
    return {
        "name": case["name"],
        "error": None,
        "steps": steps,
        "outputs": {rid: len(r.output_ids) for rid, r in seen.items()},
        "info": {
            "max_total_num_tokens": s.max_total_num_tokens,
            "max_running_requests": s.max_running_requests,
            "page_size": s.page_size,
            "tree_cache": type(s.tree_cache).__name__,
        },
    }


if __name__ == "__main__":
    sys.exit(serve(ENGINE, _imports, run_case))
