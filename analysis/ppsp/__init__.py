"""The PPSP summation ring (ppsp-ring-summation.txt).

Named here for ``privgames list`` without importing the game (see
:data:`privgames.analysis.experiments.GAMES`)."""

#: Its page: ``privgames viz ppsp``.
PAGE = "ppsp"

#: Its experiments (registered by its ``experiments`` module) and their one-line summaries.
EXPERIMENTS = {
    "ppsp-ring": (
        "PPSP ring (SI or AI): estimator error vs the exact formula and Theorems 1-2, "
        "sum invariance, epsilon (Theorem 3); join/leave; vectorized or Ray backend"),
    "ppsp-example2": (
        "Example 2 (Figs 2-3): 10 nodes summing to 500, v=1000/(k+1), node 10 leaves "
        "at k=2000 and joins back at k=4000"),
    "ppsp-epsilon": (
        "Theorem 3: epsilon vs K (harmonic, geometric) beside the privacy loss and the "
        "eavesdropper's accuracy measured on Laplace transcripts"),
    "ppsp-attack": (
        "Attack success vs noise scale c: eavesdropper / curious-neighbour estimation "
        "error and distinguishing accuracy against the epsilon-DP bound"),
    "ppsp-tradeoff": "Theorem 4: the optimal c from the cubic vs numerical minimisation",
    "ppsp-learning": (
        "Nodes learn their noise scale c_i by best response (privacy depends on the "
        "smallest c): learned profile vs Theorem 4's optimum, equal and unequal weights"),
}
