"""Roofline cost model: how long one engine step takes on a given GPU and model (§5.4).

Notable features
- Per-operator roofline: each operator costs max(FLOP / achieved FLOP/s, bytes / achieved
  bandwidth). Achieved = nominal peak × efficiency (`DeviceProfile`: MFU, MFU_attn, MBU).
- Operators of one step: the dense linear layers (all tokens share ONE read of the weights, which
  is why batching decodes is nearly free below the knee), the routed experts of a MoE model (a
  step reads every expert ANY of its tokens picked: `ModelSpec.expected_experts`, so MoE decode
  gets dearer per token as the batch grows until every expert is read; and computes whole
  `MOE_BLOCK_ROWS`-row tiles per picked expert, so a prefill whose tokens spread thin over
  many experts is slower than its FLOPs say), the lm_head (only sampled
  positions get logits), prefill attention (compute-bound, quadratic in the chunk), decode
  attention (reads every request's KV: memory-bound), sampling, the communication of tensor and
  expert parallelism, and a fixed per-step overhead.
- Parallelism (`tensor_parallel` GPUs per instance): FLOPs, weights and KV heads split over the
  ranks; each layer adds two ring all-reduces of the activations, 2(n−1)/n·bytes/link + 2(n−1)
  hops of link latency each; the lm_head's logits are all-gathered. What does NOT shrink with
  more ranks: the per-step overhead, sampling (one rank samples the full vocabulary), the
  collectives' latency (it grows), and KV heads copied when ranks outnumber them. Expert
  parallelism across `expert_parallel_instances` data-parallel instances (vLLM's DP + EP): each
  holds 1/g of the experts, the MoE layers run on all instances' tokens together (`group_tokens`:
  the lockstep group's tokens, from sim/cluster/worker.py's LockstepGroup; g equally loaded
  instances when not given) and gather/scatter the tokens held elsewhere over the link.
- Every term is a function of the step's shape only (prefill chunks, number of decodes, their
  total context): for a fixed set of chunks and decodes, a step's time is affine in
  `decode_context_tokens`, which a fast path may use to sum runs of decode-only steps.
- `StepCost` splits the time into compute-bound, memory-bound, communication and overhead
  seconds, so the UI can colour a step by what limited it.
- `step_cost` runs once per simulated step (~50k times a run), so every constant is precomputed in
  `__init__` and the call does a few float operations per prefill chunk.
- `terms` gives the same step as unscaled operator times, which `sim.cost.calibrate` fits a profile
  to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sim.cost.hardware import GpuSpec, ModelSpec
from sim.cost.measured_step import MeasuredStep
from sim.cost.step_terms import (
    ACT_BYTES,
    SAMPLE_BYTES_PER_LOGIT,
    Chunk,
    DeviceProfile,
    RooflineTerms,
    StepCost,
    moe_rows,
)

if TYPE_CHECKING:
    from sim.cost.kernel_tables import KernelTimes


class StepCostModel:
    """Step durations for one model on `tensor_parallel` GPUs of one kind, under a profile."""

    # Constants are baked in at construction: to change the profile, build a new StepCostModel.
    __slots__ = (
        "gpu",
        "model",
        "tensor_parallel",
        "expert_parallel_instances",
        "profile",
        "_flop_s",
        "_lin_flop_s",
        "_attn_flop_s",
        "_byte_s",
        "_c",
        "_moe",
        "kernels",
        "_measured",
        "_ep",
    )

    def __init__(
        self,
        gpu: GpuSpec,
        model: ModelSpec,
        tensor_parallel: int = 1,
        profile: DeviceProfile | None = None,
        expert_parallel_instances: int = 1,
        kernels: KernelTimes | None = None,
    ) -> None:
        """`kernels`: measured seconds (sim/cost/kernel_tables.py' KernelTimes, one rank) of the
        operators the tables price for this deployment (linear layers, prefill and decode
        attention, routed experts, TP all-reduces); None = the roofline prices every operator
        at the profile's MFU/MBU."""
        if not isinstance(tensor_parallel, int) or tensor_parallel < 1:
            raise ValueError(f"tensor_parallel must be an int >= 1, got {tensor_parallel!r}")
        g = expert_parallel_instances
        if not isinstance(g, int) or g < 1:
            raise ValueError(f"expert_parallel_instances must be an int >= 1, got {g!r}")
        self.gpu, self.model, self.tensor_parallel = gpu, model, tensor_parallel
        self.expert_parallel_instances = g = g if model.moe is not None else 1
        self.profile = profile = profile or DeviceProfile()
        self.kernels = kernels
        self._measured = MeasuredStep(kernels, profile.kernel_scale) if kernels else None
        k = tensor_parallel  # FLOP and bytes split evenly over k GPUs working in parallel
        self._flop_s = gpu.bf16_tflops * 1e12 * k  # peak BF16 FLOP/s of the TP group
        self._lin_flop_s = gpu.matmul_tflops(model.matmul_bytes_per_param) * 1e12 * k  # FP8/FP4
        self._byte_s = gpu.mem_bw_gb_s * 1e9 * k  # peak bytes/s of the TP group
        flop_s, mfu_attn_flop_s = self._lin_flop_s * profile.mfu, self._flop_s * profile.mfu_attn
        byte_s = self._byte_s * profile.mbu
        # KV bytes per token as the ranks hold them (heads copied when ranks outnumber them).
        kv = model.kv_bytes_per_token * model.kv_replication(k)
        expert_flops = 2 * model.params_expert * (model.moe.experts_per_token if model.moe else 0)
        dense_flops = model.flops_per_token_body - expert_flops
        w = model.stored_bytes_per_param  # bytes read per weight (block scales included)
        expert_bytes = model.params_expert * w  # one expert, all MoE layers
        body_bytes = model.dense_weight_bytes  # attention projections at their own width
        # Attention projections left unquantized (ModelSpec.attention_bytes) run at their width's
        # rate, the rest of the dense layers at the quantized one.
        self._attn_flop_s = gpu.matmul_tflops(model.attention_matmul_bytes) * 1e12 * k
        attn_flops = 2 * model.params_attention
        dense_s = (dense_flops - attn_flops) / flop_s + attn_flops / (
            self._attn_flop_s * profile.mfu
        )
        head_bytes = model.params_lm_head * model.head_bytes_per_param
        head_flop_s = self._flop_s * profile.mfu  # the lm_head stays BF16
        # Collectives over the GPU-to-GPU link, ring algorithm: an all-reduce of B bytes over n
        # ranks moves 2(n−1)/n·B per rank and takes 2(n−1) latency hops; an all-gather or
        # reduce-scatter half of each.
        link_byte_s, hop_s = gpu.interconnect_gb_s * 1e9, gpu.link_latency_us * 1e-6
        act = model.hidden * ACT_BYTES  # bytes of one token's activations
        ar_tok = 2 * model.layers * 2 * (k - 1) / k * act / link_byte_s  # 2 all-reduces a layer
        ar_lat = 2 * model.layers * 2 * (k - 1) * hop_s
        gather_tok = (k - 1) / k * model.vocab * ACT_BYTES / link_byte_s  # logits, per sample
        gather_lat = (k - 1) * hop_s
        # Expert parallel over g instances (vLLM's default all2all backend,
        # "allgather_reducescatter": vllm/config/parallel.py): per MoE layer, all-gather the
        # other instances' tokens and reduce-scatter their results (each token the others hold
        # comes in once and goes back once). Equal load: (g−1)·T tokens held elsewhere.
        ep_recv = model.moe_layers * 2 * act / link_byte_s  # s per token held elsewhere
        ep_tok = (g - 1) * ep_recv
        ep_lat = model.moe_layers * 2 * (g - 1) * hop_s
        self._ep = (ep_tok, ep_lat)  # (with a measured all-reduce, the rest of comm)
        # Sampling: one rank reads every sampled position's logits (not split by TP).
        sample_s = model.vocab * SAMPLE_BYTES_PER_LOGIT / (gpu.mem_bw_gb_s * 1e9 * profile.mbu)
        # Precomputed seconds per unit (at the profile's efficiencies) and FLOP / byte constants,
        # kept in one tuple so step_cost unpacks them with a single attribute lookup.
        self._c = (
            dense_s,  # dense linear compute, s per token
            body_bytes / byte_s,  # dense linear weights read once per step, s
            kv / byte_s,  # one token of KV read or written, s
            model.flops_lm_head_per_token / head_flop_s,  # lm_head compute, s per sampled position
            head_bytes / byte_s,  # lm_head weights read, s
            model.attn_flops_per_ctx_token / mfu_attn_flop_s,  # s per (query, key) pair
            ar_tok + ep_tok,  # collectives' transfer, s per token
            ar_lat + ep_lat,  # collectives' latency, s per step
            profile.overhead_s,
            profile.overhead_per_seq_s,
            model.flops_per_token_body,
            model.flops_lm_head_per_token,
            model.attn_flops_per_ctx_token,
            body_bytes,
            head_bytes,
            kv,
            sample_s,  # sampling, s per sampled position (one rank, bandwidth-bound)
            gather_tok,  # the logits' all-gather across TP ranks, s per sampled position
            gather_lat,  # the all-gather's latency, s (steps that sample)
        )
        # MoE: (expert compute s per token row, s to read one expert, E/g, 1 − k/E, g, FLOP per
        # token row, bytes, s of expert-parallel transfer per token held by another instance,
        # k/E: the share of a token's routes each expert gets). A token row = one token through
        # one expert (all MoE layers).
        self._moe = None
        if model.moe is not None:
            m = model.moe
            row_flops = 2 * model.params_expert
            self._moe = (
                row_flops / flop_s,
                expert_bytes / byte_s,
                m.num_experts / g,
                1.0 - m.experts_per_token / m.num_experts,
                g,
                row_flops,
                expert_bytes,
                ep_recv,
                m.experts_per_token / m.num_experts,
            )

    def _experts(self, tokens: int, group: float = 0) -> tuple[float, float, float, float]:
        """Routed experts of a step of `tokens` tokens: (compute s, memory s, FLOP, bytes read).

        The MoE layers of an expert-parallel group run on all `group` tokens of its g instances
        (T·g when not given: equally loaded instances). This instance reads each of its E/g
        experts that any of those tokens picked, and computes their token rows padded to whole
        tiles (`moe_rows`); the FLOP returned are the useful ones, group/g tokens' top-k.
        """
        per_row, per_expert, local, miss, g, flops, nbytes, _, route = self._moe
        if not group:
            group = tokens * g
        touched = local * (1.0 - miss**group)
        useful = group * route * local  # token rows routed to this instance's experts
        rows = moe_rows(useful, touched)
        return rows * per_row, touched * per_expert, useful * flops, touched * nbytes

    def step_cost(
        self,
        prefill_chunks: Sequence[Chunk],
        num_decodes: int,
        decode_context_tokens: int,
        group_tokens: int = 0,
    ) -> StepCost:
        """Duration of one step: prefill chunks (tokens, offset, samples) plus 1-token decodes.

        `group_tokens`: under expert parallelism, the tokens ALL instances of the group run in
        this lockstep step (this one's included): the MoE layers see them all, and the tokens
        held elsewhere cross the link. 0 = every instance holds as many tokens as this one.
        """
        (
            lin_c,
            lin_w,
            kv_s,
            head_c,
            head_w,
            pair_c,
            comm_tok,
            comm_lat,
            overhead,
            per_seq,
            f_body,
            f_head,
            f_pair,
            b_body,
            b_head,
            kv_b,
            sample_s,
            gather_tok,
            gather_lat,
        ) = self._c
        if num_decodes < 0 or decode_context_tokens < 0:
            raise ValueError("num_decodes and decode_context_tokens must be >= 0")
        tokens = sampled = num_decodes
        compute = memory = 0.0
        pairs = prefix = 0
        measured = self._measured  # the tables' seconds where they priced an operator
        measured_attention = measured and measured.prefill_attention
        for c, s, samples in prefill_chunks:
            if c < 1 or s < 0:
                raise ValueError(f"prefill chunk needs tokens >= 1 and offset >= 0, got {(c, s)}")
            tokens += c
            sampled += samples
            # Causal attention of c new queries over s cached + their own keys: (query, key) pairs.
            n = c * s + c * (c + 1) // 2
            pairs += n
            prefix += s
            # FlashAttention is one fused kernel: its roofline is max(pair FLOP, prefix KV read).
            t_c, t_m = n * pair_c, s * kv_s
            if measured_attention:  # measured kernel (x the profile's kernel_scale)
                compute += measured_attention(c, s)
            elif t_c >= t_m:
                compute += t_c
            else:
                memory += t_m
        if tokens == 0:
            raise ValueError("empty step: give at least one prefill chunk or one decode")
        # Dense linear layers: every token's matmuls, against one read of the weights + KV write.
        t_c, t_m = tokens * lin_c, lin_w + tokens * kv_s
        if measured and measured.linear:  # measured GEMMs
            # (the new tokens' KV write stays on the roofline)
            seconds = measured.linear(tokens)
            memory += tokens * kv_s
            if t_c >= lin_w:  # booked on the side the roofline says binds, for the breakdown
                compute += seconds
            else:
                memory += seconds
        elif t_c >= t_m:
            compute += t_c
        else:
            memory += t_m
        weights_read = b_body
        if measured and measured.allreduce:  # measured TP all-reduces, EP transfers roofline
            ep_tok, ep_lat = self._ep
            comm = ep_lat + tokens * ep_tok + measured.allreduce(tokens)
        else:
            comm = comm_lat + tokens * comm_tok
        if self._moe is not None:  # routed experts: the picked ones' weights, the top-k FLOPs
            t_c, t_m, _, e_bytes = self._experts(tokens, group_tokens)
            weights_read += e_bytes
            if measured and measured.moe:  # measured fused experts, on the roofline's side
                seconds = measured.moe(group_tokens or tokens * self._moe[4])
                t_c, t_m = (seconds, 0.0) if t_c >= t_m else (0.0, seconds)
            if t_c >= t_m:
                compute += t_c
            else:
                memory += t_m
            if group_tokens:  # the tokens held elsewhere, not (g−1)·tokens
                g = self._moe[4]
                comm += (group_tokens - g * tokens) * self._moe[7]
        if sampled:  # lm_head: logits only for sampled positions (decodes, last prompt chunks)
            t_c = sampled * head_c
            seconds = measured.lm_head(sampled) if measured and measured.lm_head else None
            if t_c >= head_w:  # (measured: booked on the side the roofline says binds)
                compute += t_c if seconds is None else seconds
            else:
                memory += head_w if seconds is None else seconds
            memory += sampled * sample_s  # sampling
            comm += gather_lat + sampled * gather_tok  # the logits' all-gather under TP
            weights_read += b_head
        # Decode attention: each decode reads its whole context's KV; ~H/H_kv FLOP per byte is
        # far below any GPU's ridge point, so it is always memory-bound. Measured: a per-batch
        # part, then the context's (added last: see decode_kv_s_per_token).
        if measured and measured.decode_per_token:
            memory += measured.decode_intercept(num_decodes)
            memory += decode_context_tokens * measured.decode_per_token
        else:
            memory += decode_context_tokens * kv_s
        overhead = overhead + per_seq * (num_decodes + len(prefill_chunks))
        flops = tokens * f_body + sampled * f_head + (pairs + decode_context_tokens) * f_pair
        kv_bytes = (tokens + prefix + decode_context_tokens) * kv_b  # KV written + read
        return StepCost(
            overhead + compute + memory + comm,
            compute,
            memory,
            overhead,
            comm,
            float(flops),
            float(weights_read + kv_bytes),
        )

    @property
    def kernel_source(self) -> str:
        """Which measured tables priced which operators; "roofline" when none did."""
        return self.kernels.source if self.kernels is not None else "roofline"

    @property
    def kernel_sources(self) -> dict[str, str]:
        """Operator -> what priced it (a table, or "roofline"); {} without kernel tables."""
        return dict(getattr(self.kernels, "sources", {}) or {})

    @property
    def decode_kv_s_per_token(self) -> float:
        """Seconds a decode-only step adds per token of context it reads (the KV read).

        In `step_cost` the decode context enters ONLY as the last term added to memory_s,
        `decode_context_tokens * this`; everything else in a decode-only step depends on the
        batch size alone. sim/fastforward/steps.py relies on that to price a run of decode steps.
        Measured decode attention keeps that form: a per-batch part plus this slope.
        """
        m = self._measured
        return m.decode_per_token if m and m.decode_per_token else self._c[2]

    def terms(
        self, prefill_chunks: Sequence[Chunk], num_decodes: int, decode_context_tokens: int
    ) -> RooflineTerms:
        """The step's operators at 100% efficiency (slower than step_cost; for calibration)."""
        m, f, f_lin, b = self.model, self._flop_s, self._lin_flop_s, self._byte_s
        kv = m.kv_bytes_per_token * m.kv_replication(self.tensor_parallel)
        chunks = [(int(c), int(s), int(smp)) for c, s, smp in prefill_chunks]
        tokens = num_decodes + sum(c for c, _, _ in chunks)
        sampled = num_decodes + sum(smp for _, _, smp in chunks)
        if tokens <= 0:
            raise ValueError("empty step: give at least one prefill chunk or one decode")
        moe = self._moe
        expert_flops = moe[5] * m.moe.experts_per_token if moe else 0
        body = m.dense_weight_bytes
        attn_flops = 2 * m.params_attention
        dense_flops = m.flops_per_token_body - expert_flops - attn_flops
        dense_s = tokens * (dense_flops / f_lin + attn_flops / self._attn_flop_s)
        linear = [(dense_s, (body + tokens * kv) / b)]
        measured = 0.0  # seconds from the kernel tables: not scaled by the profile
        mp = self._measured
        if mp and mp.linear:
            linear, measured = [(0.0, tokens * kv / b)], mp.linear(tokens)
        if moe and mp and mp.moe:
            measured += mp.moe(tokens * moe[4])
        elif moe:
            touched = moe[2] * (1.0 - moe[3] ** (tokens * moe[4]))
            rows = moe_rows(tokens * moe[4] * moe[8] * moe[2], touched)
            linear.append((rows * moe[5] / f_lin, touched * moe[6] / b))
        c = self._c
        comm = c[7] + tokens * c[6]
        if mp and mp.allreduce:
            comm = self._ep[1] + tokens * self._ep[0] + mp.allreduce(tokens)
        # Sampling is bandwidth-bound like decode attention, so it rides in kv_read_s (÷ MBU).
        kv_read = decode_context_tokens * kv / b
        if mp and mp.decode_per_token:
            kv_read = 0.0
            measured += mp.decode_intercept(num_decodes)
            measured += decode_context_tokens * mp.decode_per_token
        if sampled and mp and mp.lm_head:
            measured += mp.lm_head(sampled)
        elif sampled:
            head = m.params_lm_head * m.head_bytes_per_param
            linear.append((sampled * m.flops_lm_head_per_token / f, head / b))
        if sampled:
            kv_read += sampled * m.vocab * SAMPLE_BYTES_PER_LOGIT / (self.gpu.mem_bw_gb_s * 1e9)
            comm += c[18] + sampled * c[17]
        attention = tuple(
            ((c * s + c * (c + 1) // 2) * m.attn_flops_per_ctx_token / f, s * kv / b)
            for c, s, _ in chunks
        )
        if mp and mp.prefill_attention:
            measured += sum(mp.prefill_attention(c, s) for c, s, _ in chunks)
            attention = ()
        return RooflineTerms(
            tuple(linear), attention, kv_read, comm + measured, num_decodes + len(chunks)
        )

    def knee_tokens(self, effective: bool = False) -> float:
        """Tokens per step where the linear layers turn compute-bound: b_w·F/(2·BW) (§5.4).

        Model-independent at nominal peaks; `effective=True` scales by MFU/MBU instead.
        """
        ratio = self.profile.mfu / self.profile.mbu if effective else 1.0
        peak = self.gpu.matmul_tflops(self.model.matmul_bytes_per_param)
        flop_per_byte = peak * 1e12 / (self.gpu.mem_bw_gb_s * 1e9)
        return self.model.stored_bytes_per_param * flop_per_byte * ratio / 2

    def decode_step_s(self, batch: int, context: int) -> float:
        """Seconds for a decode-only step of `batch` requests, each with `context` cached tokens."""
        return self.step_cost((), batch, batch * context).seconds

    def prefill_s(self, tokens: int, offset: int = 0) -> float:
        """Seconds for a step holding one (final) prefill chunk of `tokens` prompt tokens."""
        return self.step_cost(((tokens, offset, True),), 0, 0).seconds
