"""The torch model: decoder (`llama`), attention layouts (`attention`, `flat_attention`), K/V
store (`kvstore`), CUDA graphs for decode steps (`decode_graphs`), weights and tokenizer."""
