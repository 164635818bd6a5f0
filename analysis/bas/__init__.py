"""The BAS chain (chained-dp-bas-sar.txt): users learn their noise in the Broadcast-And-Shuffle
chain.

Named here for ``privgames list`` without importing the game (see
:data:`privgames.analysis.experiments.GAMES`)."""

#: Its page: ``privgames viz bas``.
PAGE = "bas"

#: Its experiments (registered by its ``experiments`` module) and their one-line summaries.
EXPERIMENTS = {
    "bas-chain": (
        "BAS chain: users learn their noise by best response; distance to the Theorem "
        "1 NE and MSE vs LDP and the centralized optimum"),
    "bas-mse-vs-d": "Fig 3: MSE and privacy budget vs dimension d (K=10, beta ~ U[0, 1.3])",
    "bas-mse-vs-beta": "Figs 4-5: MSE and average cost vs the preference range beta_max (d=50)",
    "bas-split": "Fig 6: MSE vs number of sub-sequences, random vs sorted split (K=100)",
    "bas-mse-vs-K": "Fig 7: MSE vs number of users K (d=50, beta ~ U[0, 1.3])",
    "bas-properties": (
        "E1-E4 measured: truthfulness grid, fairness (Theorem 3), voluntary "
        "participation (Theorem 4), PoA vs the Theorem 5 bound"),
}
