"""SAR slicing (chained-dp-bas-sar.txt): colluding users attack a victim's slices.

Named here for ``privgames list`` without importing the game (see
:data:`privgames.analysis.experiments.GAMES`)."""

#: Its page: ``privgames viz sar``.
PAGE = "sar"

#: Its experiments (registered by its ``experiments`` module) and their one-line summaries.
EXPERIMENTS = {
    "sar-attack": (
        "SAR: weak/strong colluders attack a victim's slices on the simulated "
        "messages; success vs eq (31) and the corrected eq (32)"),
    "sar-success-vs-p": "Attack success vs p and K, weak and strong attackers, against theory",
    "sar-exposure-vs-N": "Exposed fraction and whole-vector exposure vs the number of slices N",
    "sar-thresholds": (
        "Fig 8: p_k thresholds (eq 33, strong numerically) and the failure rate "
        "measured at them vs 1/K^2"),
    "sar-participation": (
        "Users estimate p from their neighbours and opt out past the threshold: "
        "participation and attack success over rounds"),
}
