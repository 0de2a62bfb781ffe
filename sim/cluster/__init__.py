"""Serving in simpy: the topologies (`topologies`: colocated, a router over instances,
disaggregated prefill/decode) and one instance's serving loop (`worker`)."""
