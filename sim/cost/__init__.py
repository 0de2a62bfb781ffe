"""How long a step takes: the GPU and model types (`specs`), their catalog (`hardware`,
`hf_config`), the roofline step cost (`roofline`), default device profiles (`profiles`) and their
calibration (`calibrate`)."""
