"""SAR slicing (chained-dp-bas-sar.txt): colluding users attack a victim's slices.

``experiments`` registers its experiments, ``figures`` draws them, ``page`` is its page; this
file only names the experiments (read by ``privgames list`` without importing them).
"""

#: The route of its page (``privgames viz sar``; ``page.PAGE``).
PAGE = "sar"

#: The experiments ``experiments`` registers: name -> one line for ``privgames list``.
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
