"""Experiments: grids of runs across workers, seeds and settings, run on a backend and reported."""
