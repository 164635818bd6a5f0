"""APES/S-APES (apes-shuffle-clip-laplace.txt): Clip-Laplace, shuffling, amplification.

Named here for ``privgames list`` without importing the game (see
:data:`privgames.analysis.experiments.GAMES`)."""

#: Its page: ``privgames viz apes``.
PAGE = "apes"

#: Its experiments (registered by its ``experiments`` module) and their one-line summaries.
EXPERIMENTS = {
    "apes": (
        "Personalized-LDP federated logistic regression (digits, d = 650): "
        "Non-Private, LDP-Min, PLDP, UniS, APES, S-APES; accuracy and every epsilon "
        "(the Table 3 analogue)"),
    "apes-clip": "Fig 3(a): accuracy vs the clip bound C, Clip-Laplace (APES) vs Laplace (UniS)",
    "apes-sparsify": (
        "Fig 3(b): S-APES accuracy vs the sparsification ratio b/d, post- (top-b after "
        "perturbation) vs random sparsification"),
    "apes-bounds": (
        "Fig 2(a): central epsilon vs n per budget distribution, the baseline (eq 2) "
        "and EoN (Theorem 4) bounds closed and numerical, Erlingsson'19"),
    "apes-audit": (
        "Empirical audit: a distinguishing attack on one user's datum from the "
        "shuffled Clip-Laplace reports, a Clopper-Pearson lower bound on the central "
        "epsilon beside the EoN and baseline upper bounds"),
}
