"""Experiments, Ray sweeps, metrics, plots, the results store and the ``privgames`` CLI."""
