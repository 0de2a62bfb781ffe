"""The formulas the lessons show, in LaTeX (one place, so every page shows the same one)."""

# Formulas too wide for a 390-px phone (the step time was 502 px in a 324-px box, and KaTeX
# cuts a wide one off at the right) break into lines: `gathered` stacks equations, `aligned`
# continues one at its "=". P(lambda): the share of requests within both targets at rate lambda.
TTFT_TPOT = (
    r"\begin{gathered}\mathrm{TTFT} = t_\mathrm{queue} + t_\mathrm{prefill} \\ "
    r"\mathrm{TPOT} = \frac{t_\mathrm{last} - t_\mathrm{first}}{n_\mathrm{out} - 1}"
    r"\end{gathered}"
)
KV_TRANSFER = (
    r"t_\mathrm{KV} = \frac{n_\mathrm{prompt} \cdot 2 L \, H_\mathrm{kv} \, d_h \, b}"
    r"{\mathrm{bandwidth}} + \mathrm{latency}"
)
STEP_TIME = (
    r"\begin{aligned}t_\mathrm{step} = {} & t_\mathrm{overhead} \\ & + \max\Big(\frac{2 N T}"
    r"{F\cdot \mathrm{MFU}},\ \frac{W}{B\cdot \mathrm{MBU}}\Big) \\ "
    r"& + \frac{\sum_i \mathrm{ctx}_i \cdot \mathrm{kv}}{B \cdot \mathrm{MBU}}\end{aligned}"
)
KNEE = r"T^{*} \approx \frac{b_w \cdot F}{2 B}"
GOODPUT = (
    r"\begin{gathered}\mathrm{goodput} = \max\{\lambda : P(\lambda) \ge 90\%\} \\ "
    r"P(\lambda) = \Pr[\mathrm{TTFT} \le S_1 \wedge \mathrm{TPOT} \le S_2]\end{gathered}"
)
