"""PD Lab's figure builders, in one import: `from ui.charts import roofline, kv_use, ...`.

Every builder is a pure function: specs or tables in, a plotly Figure out. None imports
streamlit, every visible string goes through `ui.i18n.t`, and the look (projector-sized fonts,
legend above the plot, phase colours) comes from `ui.charts_base.styled` and `ui.theme`.

Notable features
- Cost-model figures (claim C1): `step_time_vs_prompt` and `step_time_vs_batch`
  (`ui.charts_steps`), `roofline` (`ui.charts_roofline`). The knee and the memory-/compute-bound
  shading come from `sim.cost.roofline.StepCostModel`, the model the simulator runs on.
- Load figures (`ui.charts_load`, C3, C6, C10c): `throughput_vs_concurrency` (with
  `concurrency_table` and `saturation_concurrency`), `chunk_tradeoff` (with
  `chunk_tradeoff_table`) and `goodput_curves`.
- Run figures (`ui.charts_run`, C10c, C11, C12): `kv_use`, `worker_utilisation_bars`,
  `tokens_in_window_bars`.
- Speculative decoding (`ui.charts_spec`): `spec_tpot_chart` and `spec_ratio_chart`, TPOT with
  and without speculation against the batch size, the crossover marked.
- Fidelity (`ui.charts_fidelity`): `fidelity_table` and `fidelity_scatter`, the simulator's
  errors against public measurements of real servers (`load_report` reads them).
- The modules are split by topic to stay short; this one only re-exports them.
"""

from ui.charts_fidelity import (
    KERNELS_REPORT_PATH,
    baseline_figures,
    fidelity_scatter,
    fidelity_table,
    load_report,
)
from ui.charts_load import (
    chunk_tradeoff,
    chunk_tradeoff_table,
    concurrency_table,
    goodput_curves,
    saturation_concurrency,
    throughput_vs_concurrency,
)
from ui.charts_roofline import gemm_efficiency, has_measured_gemms, roofline, roofline_points
from ui.charts_run import kv_use, tokens_in_window_bars, worker_utilisation_bars
from ui.charts_spec import spec_ratio_chart, spec_tpot_chart
from ui.charts_steps import cost_model, step_time_vs_batch, step_time_vs_prompt

__all__ = [
    "KERNELS_REPORT_PATH",
    "baseline_figures",
    "fidelity_scatter",
    "fidelity_table",
    "load_report",
    "chunk_tradeoff",
    "chunk_tradeoff_table",
    "concurrency_table",
    "cost_model",
    "goodput_curves",
    "kv_use",
    "gemm_efficiency",
    "has_measured_gemms",
    "roofline",
    "roofline_points",
    "saturation_concurrency",
    "spec_ratio_chart",
    "spec_tpot_chart",
    "step_time_vs_batch",
    "step_time_vs_prompt",
    "throughput_vs_concurrency",
    "tokens_in_window_bars",
    "worker_utilisation_bars",
]
