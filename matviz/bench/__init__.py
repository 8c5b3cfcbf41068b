"""Benchmark scripts. They print ratios measured in one run; they are not tests."""
