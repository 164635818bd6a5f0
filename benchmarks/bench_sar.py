"""Speed of the SAR attack kernel, as a ratio measured in one run.

    python benchmarks/bench_sar.py [--quick]

Reports victim-slice trials per second at K=20 (weak and strong attackers) and the ratio of
numpy's raw random-number rate to the kernel's rate for the same count of random numbers
(medians of five interleaved repetitions).
"""

from __future__ import annotations

import json
import statistics

import numpy as np
from _common import arguments, timed

from privgames.environments.sar import SARConfig, simulate_attacks


def random_numbers_per_trial(cfg: SARConfig) -> int:
    """The reference work of a trial with N=1 and d=1: the random numbers of the protocol as
    specified (colluder flags of the K-1 others, a shuffle of K positions (K-1 draws), data,
    the first user's noise, (strong) planted data). The kernel draws fewer (the colluders'
    count, the victim's place and K places instead of flags and a shuffle), so the ratio is
    its trial rate against numpy drawing one specified trial's numbers."""
    per = (cfg.K - 1) + (cfg.K - 1) + cfg.K + 1
    return per + (cfg.K if cfg.attacker == "strong" else 0)


def measure(attacker: str, trials: int, reps: int = 5) -> dict:
    """The kernel's trial rate and its ratio to numpy's raw rate for the same random numbers:
    the median over ``reps`` interleaved pairs (kernel, raw) of the pair's ratio."""
    cfg = SARConfig(K=20, p=0.1, d=1, N=1, attacker=attacker, trials=trials)
    rng = np.random.default_rng(0)
    beta = rng.uniform(0, 1.3, cfg.K)
    draws = random_numbers_per_trial(cfg) * trials
    buf = np.zeros(draws)  # touched, so the timing excludes page faults
    pairs = [(timed(lambda: simulate_attacks(cfg, rng, beta)), timed(lambda: rng.random(out=buf)))
             for _ in range(reps)]
    return {"attacker": attacker, "K": cfg.K, "trials": trials,
            "trials_per_s": trials / statistics.median(k for k, _ in pairs),
            "random_numbers": draws,
            "ratio_to_raw": statistics.median(raw / kernel for kernel, raw in pairs)}


def main() -> None:
    args = arguments(__doc__)
    trials = 20_000 if args.quick else 1_000_000
    print(json.dumps([measure(a, trials) for a in ("weak", "strong")], indent=2))


if __name__ == "__main__":
    main()
