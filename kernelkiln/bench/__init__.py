"""Benchmark runs of the optimizer over a suite, and the field's metrics over them."""
