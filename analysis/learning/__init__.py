"""Learning dynamics in every game: users who learn from what they experience.

Named here for ``privgames list`` without importing the game (see
:data:`privgames.analysis.experiments.GAMES`)."""

#: Its page: ``privgames viz learning``.
PAGE = "learning"

#: Its experiments (registered by its ``experiments`` module) and their one-line summaries.
EXPERIMENTS = {
    "learning-dynamics": (
        "Users who learn from what they experience: fictitious play, Hedge, regret "
        "matching (full information), EXP3, SPSA (bandit) and best response in every "
        "game; distance to the NE, regret vs its bound, CCE gap"),
}
