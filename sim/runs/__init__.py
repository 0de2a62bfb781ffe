"""What is done with runs: metrics and SLOs, goodput sweeps (in parallel), the budgets a hosted
visitor cannot exceed, the memory guard of the command line, and export to files."""
