"""Benchmarks that print figures (not tests). See bench/README.md and docs/benchmarks.md."""
