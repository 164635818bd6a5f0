"""Chain users of the BAS mechanism (Chained-DP paper, sections IV-V).

A user knows only its own preference ``beta`` and what reaches it: the running sum it receives
(a follower) or the outcome of the whole chain (the first user).
"""

from __future__ import annotations

import mesa

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
        self.estimate = 0.0
        self.estimates = 0

    def lead(self) -> None:
        """As first user, best-respond to the believed follower reaction.

        Believing the followers top the total up to ``belief``, the total is
        ``max(sigma2, belief)`` and the cost is minimised at ``max(belief, m beta)``.
        """
        target = self.belief + float(best_response(self.belief, self.beta))
        self.sigma2 = self.learner.update(self.sigma2, target)

    def observe_outcome(self, total_variance: float, rtol: float = 1e-12) -> None:
        """Revise the belief from the chain's total noise variance after a round.

        If the followers added noise, they topped it up to ``total_variance``; if they added
        none, their level is at most this user's own noise.
        """
        if total_variance > self.sigma2 * (1.0 + rtol):
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
