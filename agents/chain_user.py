"""Chain users of the BAS mechanism (Chained-DP paper, sections IV-V).

A user knows only its own preference ``beta`` and what reaches it: the running sum it receives
(a follower) or the outcome of the whole chain (the first user).
"""

from __future__ import annotations

import mesa
import numpy as np

from privgames.agents.learners import Learner
from privgames.mechanisms.chain import best_response


class ChainUser(mesa.Agent):
    """A selfish user who adds Gaussian noise to the running sum.

    Attributes:
        beta: private preference ``beta_k = alpha_k^(2/3)``.
        bid: the preference it broadcasts in Stage 1 of BAS (``beta`` when truthful).
        sigma2: its current noise variance (strategy).
        learner: its learning rule.
        belief: as first user, the level up to which it believes the followers top the noise up;
            it starts from the broadcast bids (or 0) and is revised from observed outcomes.
        last_round: as first user, its own variance and the chain's total last round.
        estimates: as a follower with estimated observation, its running mean of upstream
            variance estimates, and how many it has averaged.
    """

    def __init__(self, model: mesa.Model, beta: float, bid: float, sigma2: float,
                 learner: Learner) -> None:
        super().__init__(model)
        self.beta = float(beta)
        self.bid = float(bid)
        self.sigma2 = float(sigma2)
        self.learner = learner
        self.belief = 0.0
        self.last_round: tuple[float, float] | None = None
        self.estimate = 0.0
        self.estimates = 0

    def lead(self) -> None:
        """As first user, best-respond to the believed follower reaction.

        Believing the followers top the total up to ``belief``, the total is
        ``max(sigma2, belief)`` and the cost is minimised at ``max(belief, m beta)``.
        """
        target = self.belief + float(best_response(self.belief, self.beta))
        self.sigma2 = self.learner.update(self.sigma2, target)

    def observe_outcome(self, total_variance: float, settle: float) -> None:
        """Revise the belief from the chain's total noise variance after a round.

        The followers' reaction is read only once both its own noise and the outcome have
        settled (each moved by at most ``settle``, relative, since last round): a leader on a
        slower time scale than its followers, so their transients are not mistaken for their
        reaction. A settled total above its own noise is the followers' top-up level;
        otherwise their level is at most its own noise.
        """
        previous, self.last_round = self.last_round, (self.sigma2, total_variance)
        if previous is None or not np.allclose(previous, self.last_round, rtol=settle, atol=0):
            return
        if total_variance > self.sigma2 * (1.0 + 1e-12):
            self.belief = total_variance
        else:
            self.belief = min(self.belief, self.sigma2)

    def follow(self, upstream_variance: float) -> None:
        """As follower, best-respond (Lemma 1) to the upstream noise it observed."""
        target = float(best_response(upstream_variance, self.beta))
        self.sigma2 = self.learner.update(self.sigma2, target)

    def follow_estimate(self, upstream_estimate: float) -> None:
        """As follower seeing only data, average its estimates over rounds, then best-respond."""
        self.estimates += 1
        self.estimate += (upstream_estimate - self.estimate) / self.estimates
        self.follow(self.estimate)
