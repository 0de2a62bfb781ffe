"""What a run serves: arrival processes, length distributions, trace files (Azure, Mooncake,
our CSV), combined into a list of requests by `workload`."""
