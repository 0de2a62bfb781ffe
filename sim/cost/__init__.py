"""How long a step takes: the GPU and model catalog (`hardware`, `hf_config`), the roofline step
cost (`roofline`), default device profiles (`profiles`) and their calibration (`calibrate`)."""
