"""The pricing game of FL clients' noise (pricing-fl-noise.txt), complete and incomplete
information.

Named here for ``privgames list`` without importing the game (see
:data:`privgames.analysis.experiments.GAMES`)."""

#: Its page: ``privgames viz pricing``.
PAGE = "pricing"

#: Its experiments (registered by its ``experiments`` module) and their one-line summaries.
EXPERIMENTS = {
    "pricing-fl": (
        "Pricing FL game: clients learn their noise by global best response, with or "
        "without Definition 4's prices; end point vs eq (10), eq (11), the true optimum"),
    "pricing-fig1": (
        "Fig 1: social cost vs the variance of the types (normal, mean 0.5), with and "
        "without prices, MLE and mean rules, against the true optimum"),
    "pricing-poa": (
        "Proposition 3: PoA of the learned equilibrium vs N with equal types, beside "
        "the closed-form family"),
    "pricing-bne": (
        "Incomplete information (binary types): clients learn reports and noise; "
        "truthful reporting checked by enumeration with the derived mechanism, with "
        "penalties only, and without prices"),
    "pricing-fig2": (
        "Fig 2: expected social cost vs eta with and without the mechanism "
        "(alpha_L=0.25, alpha_H=0.75)"),
    "pricing-training": (
        "Federated squared-SVM on digits (even vs odd): clients add heterogeneous "
        "noise, mean vs MLE aggregation; loss, accuracy and eq (9)'s bound"),
}
