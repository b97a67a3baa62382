"""Tests of the benchmarks (bench/): `pytest tests/bench` runs them alone; `make test` runs them
with the rest."""
