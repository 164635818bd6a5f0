"""Experiments, Ray sweeps, metrics, the results store, the pages and the ``privgames`` CLI; one
package per game family (its experiments, figures and page)."""
