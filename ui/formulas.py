"""The formulas the lessons show, in LaTeX (one place, so every page shows the same one)."""

TTFT_TPOT = (
    r"\mathrm{TTFT} = t_\mathrm{queue} + t_\mathrm{prefill} \qquad "
    r"\mathrm{TPOT} = \frac{t_\mathrm{last} - t_\mathrm{first}}{n_\mathrm{out} - 1}"
)
KV_TRANSFER = (
    r"t_\mathrm{KV} = \frac{n_\mathrm{prompt} \cdot 2 L \, H_\mathrm{kv} \, d_h \, b}"
    r"{\mathrm{bandwidth}} + \mathrm{latency}"
)
STEP_TIME = (
    r"t_\mathrm{step} = t_\mathrm{overhead} + \max\Big(\frac{2 N T}{F\cdot \mathrm{MFU}},"
    r"\ \frac{W}{B\cdot \mathrm{MBU}}\Big) + \frac{\sum_i \mathrm{ctx}_i \cdot"
    r" \mathrm{kv}}{B \cdot \mathrm{MBU}}"
)
KNEE = r"T^{*} \approx \frac{b_w \cdot F}{2 B}"
GOODPUT = (
    r"\mathrm{goodput} = \max\{\lambda : \Pr[\mathrm{TTFT} \le S_1 \wedge "
    r"\mathrm{TPOT} \le S_2] \ge 90\%\}"
)
