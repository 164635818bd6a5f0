"""Series privacy-budget allocation and DP k-means (budget-allocation-series.txt).

Named here for ``privgames list`` without importing the game (see
:data:`privgames.analysis.experiments.GAMES`)."""

#: Its page: ``privgames viz kmeans``.
PAGE = "kmeans"

#: Its experiments (registered by its ``experiments`` module) and their one-line summaries.
EXPERIMENTS = {
    "budget-noise": (
        "Table 2: total noise MSE of N sum queries per strategy (eps = 1, l = 100 "
        "rounds) against sum_i 2/eps_i^2 and the printed values"),
    "budget-us-bounds": (
        "Tables 3-5: the U_s interval of Lemma 3 per N for the geometric (eps 0.3, "
        "0.5) and Taylor (bl-Ty, eps 0.3) strategies, beside the printed values"),
    "dp-kmeans": (
        "DP k-means (Algorithm 1) per budget strategy and total iterations: weighted "
        "F1 on an Unbalance-like set or NIVC on a 100,000-point Birch3-like set"),
    "budget-collusion": (
        "Section 6.1: m colluders pool w queries' noisy answers; the attack's error "
        "per strategy with and without each protection, against the budgets"),
    "budget-analysts": (
        "Analysts learn their budget strategy by Thompson sampling from the utility "
        "they observe (sum queries vs DP k-means); regret against the offline best"),
}
