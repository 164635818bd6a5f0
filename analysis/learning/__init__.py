"""Learning dynamics in every game: users who learn from what they experience.

``experiments`` registers its experiments, ``figures`` draws them, ``page`` is its page; this
file only names the experiments (read by ``privgames list`` without importing them).
"""

#: The route of its page (``privgames viz learning``; ``page.PAGE``).
PAGE = "learning"

#: The experiments ``experiments`` registers: name -> one line for ``privgames list``.
EXPERIMENTS = {
    "learning-dynamics": (
        "Users who learn from what they experience: fictitious play, Hedge, regret "
        "matching (full information), EXP3, SPSA (bandit) and best response in every "
        "game; distance to the NE, regret vs its bound, CCE gap"),
}
