"""SAR slicing with colluding adversaries (Chained-DP paper, section VI, Protocol 2).

Every slice of every vector runs the BAS chain in its own uniformly random order, with the
chain's equilibrium noise (Theorem 1: the first user of each sequence adds ``m max beta``). The
colluders run their attack on the simulated messages; users learn whether to take part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mesa
import numpy as np
from numpy.typing import NDArray

from privgames.agents.sar_agents import ColludingAdversary, SARUser
from privgames.environments.base import Environment
from privgames.environments.config import (
    ConfigError,
    Footprint,
    check_choice,
    check_int,
    check_real,
    check_reals,
)
from privgames.mechanisms.chain import nash_equilibrium
from privgames.mechanisms.compiled import compiled
from privgames.mechanisms.sar import (
    ATTACKERS,
    colluder_threshold,
    slice_epsilon,
    slice_exposure_given_colluders,
    slice_sizes,
    strong_estimates,
    vector_epsilon,
    weak_reconstruction,
)

MITIGATIONS = ("stale", "zero")
NOISE = ("nash", "none")


@dataclass(frozen=True)
class SARConfig:
    """Parameters of a SAR population.

    Attributes:
        K: users (>= 3). d: vector dimension. N: slices, in [1, d].
        p: probability that each other user colludes in a round, in [0, 1).
        colluders: fixed colluder ids instead of ``p`` (must not contain ``victim``).
        fraction: a fixed fraction of the other users colludes each round, in [0, 1).
        attacker: ``weak`` (Definition 4) or ``strong`` (Definition 5, data poisoning).
        victim: the user attacked in ``simulate_attacks``.
        trials: victim-slice trials of one population (``simulate_attacks``).
        beta, beta_max: preferences (drawn from ``U[0, beta_max]`` when ``beta`` is None).
        Delta, delta: data bound and DP failure probability.
        noise: ``nash`` (the chain's equilibrium noise) or ``none`` (nobody adds noise).
        tolerance: a reconstruction succeeds when its RMS error is at most ``tolerance Delta``.
        mitigation_p, mitigation: probability ``p_p`` that an honest user uploads a ``stale``
            (last round's) or ``zero`` slice (``mitigation``) instead of the new one.
        rounds: rounds of the participation dynamics (``SARModel``).
        min_observations: neighbours a user must have seen before it may opt out.
        confidence: a user opts out when the lower confidence bound of ``p`` at this level
            passes the threshold, in [0, 1) (0: the point estimate).
    """

    K: int = 20
    d: int = 10
    N: int = 1
    p: float = 0.1
    colluders: tuple[int, ...] | None = None
    fraction: float | None = None
    attacker: str = "weak"
    victim: int = 0
    trials: int = 25_000
    beta: tuple[float, ...] | None = None
    beta_max: float = 1.3
    Delta: float = 1.0
    delta: float = 1e-5
    noise: str = "nash"
    tolerance: float = 0.05
    mitigation_p: float = 0.0
    mitigation: str = "stale"
    rounds: int = 40
    min_observations: int = 20
    confidence: float = 0.9

    def footprint(self) -> Footprint:
        """One round of attack trials holds about six ``(N, K, l)`` arrays (chunks of rounds
        are at most 64 MiB, but never less than one round); the participation model attacks
        every honest user of a round at once (``K`` victims). Work: the trials' draws."""
        width = math.ceil(self.d / self.N)
        round_bytes = 48.0 * self.N * self.K * width
        peak = max(64 * 2**20, round_bytes) + 24.0 * self.K * round_bytes / 6 + 3000.0 * self.K
        work = self.trials * self.K * width + self.rounds * self.K * self.K * self.d
        return Footprint(peak, work, "K")

    def __post_init__(self) -> None:
        check_int("K", self.K, 3)
        check_int("d", self.d, 1)
        check_int("N", self.N, 1, self.d)
        check_real("p", self.p, 0.0, 1.0, high_open=True)
        check_int("victim", self.victim, 0, self.K - 1)
        if self.colluders is not None:
            if not isinstance(self.colluders, list | tuple):
                raise ConfigError(f"colluders={self.colluders!r} is not a list: colluders must "
                                  f"be user ids in [0, {self.K - 1}]")
            ids = tuple(check_int(f"colluders[{i}]", c, 0, self.K - 1)
                        for i, c in enumerate(self.colluders))
            if self.victim in ids:
                raise ConfigError(f"colluders={list(ids)} contains the victim {self.victim}: "
                                  f"colluders must be other users, ids in [0, {self.K - 1}] "
                                  f"except {self.victim}")
            object.__setattr__(self, "colluders", tuple(sorted(set(ids))))
        if self.fraction is not None:
            check_real("fraction", self.fraction, 0.0, 1.0, high_open=True)
        check_choice("attacker", self.attacker, ATTACKERS)
        check_int("trials", self.trials, 1)
        if self.beta is not None:
            object.__setattr__(self, "beta", check_reals("beta", self.beta, 0.0))
            if len(self.beta) != self.K:
                raise ConfigError(f"beta has {len(self.beta)} entries: it must have K={self.K}")
        check_real("beta_max", self.beta_max, 0.0, low_open=True)
        check_real("Delta", self.Delta, 0.0, low_open=True)
        check_real("delta", self.delta, 0.0, 1.0, low_open=True, high_open=True)
        check_choice("noise", self.noise, NOISE)
        check_real("tolerance", self.tolerance, 0.0, low_open=True)
        check_real("mitigation_p", self.mitigation_p, 0.0, 1.0)
        check_choice("mitigation", self.mitigation, MITIGATIONS)
        check_int("rounds", self.rounds, 1)
        check_int("min_observations", self.min_observations, 0)
        check_real("confidence", self.confidence, 0.0, 1.0, high_open=True)

    def colluder_count_pmf(self) -> tuple[NDArray, NDArray]:
        """Support and probabilities of the number of colluders among the victim's others."""
        others = self.K - 1
        if self.colluders is not None:
            return np.array([len(self.colluders)]), np.array([1.0])
        if self.fraction is not None:
            return np.array([round(self.fraction * others)]), np.array([1.0])
        c = np.arange(others + 1)
        from scipy.stats import binom  # here, not at import: scipy.stats costs ~0.8 s
        return c, binom.pmf(c, others, self.p)

    def predicted(self) -> dict[str, float]:
        """Theory for one victim: slice failure probability (eq 31/32 as corrected), expected
        exposed fraction and whole-vector exposure, with mitigation ``p_p`` applied."""
        c, w = self.colluder_count_pmf()
        per_slice = slice_exposure_given_colluders(self.K, c, self.attacker) * (
            1.0 - self.mitigation_p)
        failure = float(np.sum(w * per_slice))
        return {"failure_probability": failure, "exposed_fraction": failure,
                "whole_vector_exposure": float(np.sum(w * per_slice**self.N))}


def _draw_colluders(cfg: SARConfig, rng: np.random.Generator, shape: tuple[int, ...],
                    candidates: NDArray) -> NDArray:
    """Colluder flags ``shape + (len(candidates),)``: ids, a fixed fraction, or Bernoulli(p)."""
    n = candidates.size
    if cfg.colluders is not None:
        flags = np.isin(candidates, cfg.colluders)
        return np.broadcast_to(flags, (*shape, n)).copy()
    if cfg.fraction is not None:
        count = round(cfg.fraction * n)
        ranks = rng.permuted(np.broadcast_to(np.arange(n), (*shape, n)), axis=-1)
        return ranks < count
    return rng.random((*shape, n)) < cfg.p


def _slice_index(d: int, N: int) -> tuple[NDArray, NDArray]:
    """Coordinate index ``(N, l_max)`` of each slice (``d`` marks padding) and the lengths."""
    sizes = slice_sizes(d, N)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    cols = np.arange(sizes.max())
    idx = np.where(cols < sizes[:, None], starts[:, None] + cols, d)
    return idx, sizes


def nearest_colluders(seq_colluding: NDArray, position: NDArray) -> tuple[NDArray, NDArray]:
    """The positions of the colluders nearest each victim in its sequence: ``before`` (-1 if
    none) and ``after`` (``K`` if none), from flags ``(K, T)`` by position and the victims'
    positions ``(T,)`` (a compiled scan outwards from each victim)."""
    before, after = np.empty(position.size, dtype=np.int64), np.empty(position.size,
                                                                       dtype=np.int64)
    _scan_outwards(seq_colluding, position, before, after)
    return before, after


@compiled
def _scan_outwards(flags: NDArray, position: NDArray, before: NDArray, after: NDArray) -> None:
    K, T = flags.shape
    for t in range(T):
        before[t], after[t] = -1, K
        for j in range(position[t] - 1, -1, -1):
            if flags[j, t]:
                before[t] = j
                break
        for j in range(position[t] + 1, K):
            if flags[j, t]:
                after[t] = j
                break


def adjacent_colluders(seq_colluding: NDArray, position: NDArray) -> tuple[NDArray, NDArray]:
    """What the weak attack needs of :func:`nearest_colluders`, from the victim's two
    neighbours only (``O(T)``, not a scan of all ``K`` places): ``before`` is ``position - 1``
    where that neighbour colludes, else -1; ``after`` is ``position + 1`` where that one
    colludes, else ``K``. Where both collude this is exactly :func:`nearest_colluders`'s."""
    K = seq_colluding.shape[0]
    trials = np.arange(position.size)
    left = (position > 0) & seq_colluding[np.maximum(position - 1, 0), trials]
    right = (position < K - 1) & seq_colluding[np.minimum(position + 1, K - 1), trials]
    return np.where(left, position - 1, -1), np.where(right, position + 1, K)


def attack(uploads: NDArray, before: NDArray, after: NDArray, position: NDArray,
           truth: NDArray, noise: NDArray, fakes: NDArray | None, length: NDArray,
           attacker: str) -> tuple[NDArray, NDArray, NDArray]:
    """Run the chain of ``T`` slice sequences and the colluders' attack on its messages.

    Arrays are position-major (``(K, T, l)``: one row per sequence position, so the running
    sums are ``K`` contiguous vector additions).

    Args:
        uploads: ``(K, T, l)`` the uploaded slices in sequence order.
        before, after: ``(T,)`` the nearest colluders' positions (:func:`nearest_colluders`;
            :func:`adjacent_colluders` for the weak attack).
        position: ``(T,)`` the victim's position.
        truth: ``(T, l)`` the victim's true slice.
        noise: ``(T, l)`` the noise the first user adds (Theorem 1: nobody else adds any).
        fakes: ``(K, T, l)`` data the strong attackers plant on the users between them.
        length: ``(T,)`` the slice's true length (coordinates past it are zero padding).
        attacker: ``weak`` (Definition 4: both neighbours collude) or ``strong``
            (Definition 5: a colluder on each side).

    Returns:
        ``possible`` (the attackers stand where the definition needs them), the RMS and the
        largest absolute reconstruction error per trial (NaN where impossible).
    """
    K = uploads.shape[0]
    possible = (before >= 0) & (after < K)
    if attacker == "weak":
        possible &= (before == position - 1) & (after == position + 1)
        messages = np.empty_like(uploads)  # S_j: what position j sends to its successor
        np.add(uploads[0], noise, out=messages[0])
        for j in range(1, K):
            np.add(messages[j - 1], uploads[j], out=messages[j])
        estimate = weak_reconstruction(messages, position)
    else:  # a loop over each chain's positions (compiled): only two running sums are read
        estimate = np.empty(truth.shape)
        strong_estimates(uploads, noise, fakes, before, after, position, estimate)
    err = estimate - truth
    rms = np.where(possible, np.sqrt(np.einsum("tl,tl->t", err, err) / length), np.nan)
    worst = np.where(possible, np.abs(err).max(axis=1), np.nan)
    return possible, rms, worst


def _first_noise(cfg: SARConfig, beta: NDArray, shape: tuple[int, ...], width: int,
                 mask: NDArray, rng: np.random.Generator) -> NDArray:
    """The equilibrium noise of each sequence, ``shape + (width,)``: only the first user adds
    noise, of variance ``m max beta`` (Theorem 1)."""
    if cfg.noise == "none":
        return np.zeros((*shape, width))
    first = math.sqrt(nash_equilibrium(beta)[0])
    return _zero_padding(first * rng.standard_normal((*shape, width)), mask)


def play_rounds(cfg: SARConfig, rng: np.random.Generator, beta: NDArray, colluding: NDArray,
                victims: NDArray, data: NDArray) -> dict[str, NDArray]:
    """Rounds of Protocol 2 among the participants, and the colluders' attack on their
    simulated messages (:class:`SARModel`'s rounds).

    Each of the ``B`` rounds gives every slice its own uniform order of the ``k`` participants
    and attacks every victim (:func:`attack_sequences`).

    Args:
        colluding: ``(B, k)`` colluder flags of the participants.
        victims: ``(B, V)`` participant indices attacked in each round.
        data: ``(B, k, d)`` the participants' vectors.

    Returns:
        ``possible``, ``rms``, ``worst`` and ``success``, each ``(B, V, N)``, and ``order``
        (``(B, N, k)``: the participant at each position of each slice's sequence).
    """
    B, k = colluding.shape
    idx, _ = _slice_index(cfg.d, cfg.N)
    N = idx.shape[0]
    order = rng.permuted(np.broadcast_to(np.arange(k), (B, N, k)), axis=-1)  # by position
    seq_colluding = np.take_along_axis(np.broadcast_to(colluding[:, None], (B, N, k)), order,
                                       axis=2)
    seq_true = np.take_along_axis(_pad(data, idx).transpose(0, 2, 1, 3), order[..., None],
                                  axis=2)
    position = np.argmax(order[:, None] == victims[:, :, None, None], axis=3)  # (B, V, N)
    out = attack_sequences(cfg, rng, beta, seq_colluding.transpose(2, 0, 1),
                           seq_true.transpose(2, 0, 1, 3), position)
    return {**out, "order": order}


def attack_sequences(cfg: SARConfig, rng: np.random.Generator, beta: NDArray,
                     seq_colluding: NDArray | None, seq_true: NDArray, position: NDArray,
                     nearest: tuple[NDArray, NDArray] | None = None) -> dict[str, NDArray]:
    """Upload every slice in its sequence (with the mitigation), add the equilibrium noise,
    plant the strong attackers' data and attack every victim on the running sums.

    Args:
        seq_colluding: ``(k, B, N)`` colluder flags by sequence position (``None`` when
            ``nearest`` is given and there is no mitigation: nothing else reads them).
        seq_true: ``(k, B, N, l_max)`` the true slices by sequence position (zero padded).
        position: ``(B, V, N)`` each victim's position in each slice's sequence.
        nearest: the colluders nearest each victim, ``(before, after)`` flattened over
            ``(B, V, N)``, when the caller drew them directly; else located in the flags.

    Returns:
        ``possible``, ``rms``, ``worst`` and ``success``, each ``(B, V, N)``.
    """
    k, B, N, width = seq_true.shape
    V = position.shape[1]
    idx, sizes = _slice_index(cfg.d, cfg.N)
    mask = (idx < cfg.d).astype(float)  # (N, width)
    trial = np.arange(B)[:, None, None], np.arange(N)
    truth = seq_true[position, *trial]  # (B, V, N, width)
    uploads = _mitigate_slices(cfg, seq_true, seq_colluding, mask, rng)
    noise = _first_noise(cfg, beta, (B, N), width, mask, rng)
    shape = (k, B, V, N, width)
    fakes = (_zero_padding(rng.uniform(-cfg.Delta, cfg.Delta, shape), mask)
             if cfg.attacker == "strong" else None)
    position = position.reshape(-1)
    if nearest is None:
        flags = np.broadcast_to(seq_colluding[:, :, None], shape[:-1]).reshape(k, -1)
        locate = adjacent_colluders if cfg.attacker == "weak" else nearest_colluders
        nearest = locate(flags, position)
    before, after = nearest
    possible, rms, worst = attack(
        np.broadcast_to(uploads[:, :, None], shape).reshape(k, -1, width), before, after,
        position, truth.reshape(-1, width),
        np.broadcast_to(noise[:, None], (B, V, N, width)).reshape(-1, width),
        None if fakes is None else fakes.reshape(k, -1, width),
        np.tile(sizes, B * V), cfg.attacker)
    out = {"possible": possible, "rms": rms, "worst": worst,
           "success": possible & (rms <= cfg.tolerance * cfg.Delta)}
    return {key: value.reshape(B, V, N) for key, value in out.items()}


def _colluder_counts(cfg: SARConfig, rng: np.random.Generator, rounds: int) -> NDArray:
    """Colluders among the victim's ``K - 1`` others in each round: the ids' count, the fixed
    fraction's, or ``Binomial(K - 1, p)`` (each other user colludes with probability ``p``)."""
    others = cfg.K - 1
    if cfg.colluders is not None:
        return np.full(rounds, len(cfg.colluders))
    if cfg.fraction is not None:
        return np.full(rounds, round(cfg.fraction * others))
    return rng.binomial(others, cfg.p, rounds)


def arrange_colluders(count: NDArray, position: NDArray, K: int,
                      rng: np.random.Generator) -> NDArray:
    """Colluder flags ``(K, T)`` by sequence position, for sequences of ``K`` users in uniform
    random order whose victim stands at ``position`` (``(T,)``) and whose other ``K - 1``
    users include ``count`` (``(T,)``) colluders.

    Given the count, their places among the other ``K - 1`` are a uniform arrangement; the
    places are filled in order, each a colluder with probability (colluders left) / (places
    left): sampling without replacement, the law of the permutation without drawing it.
    """
    u = rng.random((K, position.size))
    flags = np.empty((K, position.size), dtype=bool)
    _fill_in_order(u, count, position, flags)
    return flags


@compiled
def _fill_in_order(u: NDArray, count: NDArray, position: NDArray, flags: NDArray) -> None:
    """:func:`arrange_colluders`'s places, a place of every trial at a time (compiled: one
    pass over the trials per place)."""
    K, T = u.shape
    left = count.astype(np.float64)
    places = np.full(T, K - 1.0)
    for j in range(K):
        for t in range(T):
            other = position[t] != j
            flag = other & (u[j, t] * places[t] < left[t])
            flags[j, t] = flag
            left[t] -= flag
            places[t] -= other


def neighbour_colluders(count: NDArray, position: NDArray, K: int,
                        rng: np.random.Generator) -> tuple[NDArray, NDArray]:
    """Like :func:`arrange_colluders`, for what the weak attack depends on only: whether the
    victim's two neighbours collude (the first two draws of the same sampling without
    replacement); the other places are not drawn. Returned as :func:`adjacent_colluders`
    returns them: ``before`` is ``position - 1`` where that neighbour colludes, else -1;
    ``after`` is ``position + 1`` where that one colludes, else ``K``."""
    u = rng.random((2, position.size))
    left = (position > 0) & (u[0] * (K - 1) < count)
    right = (position < K - 1) & (u[1] * (K - 1 - (position > 0)) < count - left)
    return np.where(left, position - 1, -1), np.where(right, position + 1, K)


def neighbour_flags(before: NDArray, after: NDArray, K: int) -> NDArray:
    """Colluder flags ``(K, T)`` marking only the places :func:`neighbour_colluders` drew
    (what the mitigation needs to tell honest users apart)."""
    flags = np.zeros((K + 2, before.size), dtype=bool)  # rows 0 and K + 1: -1 and K, dropped
    trials = np.arange(before.size)
    flags[before + 1, trials] = True
    flags[after + 1, trials] = True
    return flags[1:-1]


def simulate_attacks(cfg: SARConfig, rng: np.random.Generator, beta: NDArray,
                     max_chunk_bytes: int = 64 * 2**20) -> dict[str, NDArray]:
    """``ceil(trials / N)`` rounds of SAR against one victim, in chunks of rounds that keep
    memory under ``max_chunk_bytes``.

    Only what the attack depends on is drawn, in each slice's sequence order: the round's
    number of colluders among the victim's others, the victim's uniform position in each
    slice's sequence, the colluders' places (:func:`arrange_colluders`; for the weak attack
    only the victim's neighbours, :func:`neighbour_colluders`) and i.i.d. uniform data. That
    is the law of a uniform order of the users without drawing or gathering through the
    permutation; the chain, the noise and the attack on the running sums are
    :class:`SARModel`'s (:func:`attack_sequences`).

    Returns per-round arrays ``success``, ``possible``, ``rms`` and ``worst`` of shape
    ``(rounds, N)`` and ``exposed_fraction``.
    """
    K, N = cfg.K, cfg.N
    idx, sizes = _slice_index(cfg.d, N)
    width = idx.shape[1]
    mask = (idx < cfg.d).astype(float)
    rounds = math.ceil(cfg.trials / N)
    chunk = max(1, max_chunk_bytes // (8 * 6 * N * K * width))
    parts = []
    for start in range(0, rounds, chunk):
        c = min(chunk, rounds - start)
        count = _colluder_counts(cfg, rng, c)
        position = rng.integers(0, K, (c, N))
        if cfg.attacker == "weak":  # the neighbours' places only, as the attack needs them
            nearest = neighbour_colluders(np.repeat(count, N), position.ravel(), K, rng)
            seq_colluding = neighbour_flags(*nearest, K) if cfg.mitigation_p else None
        else:
            nearest = None
            seq_colluding = arrange_colluders(np.repeat(count, N), position.ravel(), K, rng)
        seq_true = _zero_padding(rng.uniform(-cfg.Delta, cfg.Delta, (K, c, N, width)), mask)
        out = attack_sequences(cfg, rng, beta,
                               None if seq_colluding is None else seq_colluding.reshape(K, c, N),
                               seq_true, position[:, None], nearest)
        parts.append({key: value[:, 0] for key, value in out.items()})
    result = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
    result["exposed_fraction"] = result["success"] @ sizes / cfg.d
    return result


def sar_epsilon(cfg: SARConfig, beta: NDArray) -> dict[str, float]:
    """The release's privacy budget (Theorems 6-7, with ``delta = max(delta_hat, delta)``).

    Every slice carries the noise ``m max beta`` the first user of its sequence adds. Returns
    ``epsilon``: exact, for the user's whole vector (:func:`vector_epsilon`: a neighbour
    changes every slice, so the slices compose into one Gaussian of sensitivity
    ``sqrt(d) Delta``); ``epsilon_slice``: exact, for a neighbour who differs in one slice (the
    paper's parallel-composition reading, the longest slice); ``epsilon_paper``: the paper's
    number, eq (30) per slice and the maximum over slices (Theorem 6).
    """
    variance = float(nash_equilibrium(beta).sum())  # Theorem 1's total noise
    lengths = {int(length) for length in slice_sizes(cfg.d, cfg.N)}
    return {"epsilon": vector_epsilon(cfg.d, cfg.Delta, cfg.delta, variance),
            "epsilon_slice": max(slice_epsilon(n, cfg.Delta, cfg.delta, variance)
                                 for n in lengths),
            "epsilon_paper": max(slice_epsilon(n, cfg.Delta, cfg.delta, variance, paper=True)
                                 for n in lengths)}


def _mitigate_slices(cfg: SARConfig, seq_data: NDArray, seq_colluding: NDArray, mask: NDArray,
                     rng: np.random.Generator) -> NDArray:
    """Uploads in sequence order (``(k, ..., N, width)``): each honest user's slice is replaced
    by a stale (an earlier, independent one) or zero slice with probability ``mitigation_p``."""
    if cfg.mitigation_p == 0.0:
        return seq_data
    swap = (rng.random(seq_colluding.shape) < cfg.mitigation_p) & ~seq_colluding
    replacement = (_zero_padding(rng.uniform(-cfg.Delta, cfg.Delta, seq_data.shape), mask)
                   if cfg.mitigation == "stale" else 0.0)
    return np.where(swap[..., None], replacement, seq_data)


def _zero_padding(x: NDArray, mask: NDArray) -> NDArray:
    """``x`` (``(..., N, l_max)``) with the coordinates past each slice's length zeroed, in
    place (``mask``: ``(N, l_max)``; nothing to do when every slice has the same length)."""
    if not mask.all():
        x *= mask
    return x


def _pad(x: NDArray, idx: NDArray) -> NDArray:
    """Gather slices ``(..., N, l_max)`` from the last axis of ``x``, zero past each slice."""
    padded = np.concatenate([x, np.zeros((*x.shape[:-1], 1))], axis=-1)
    return padded[..., idx]


class SARModel(Environment):
    """Rounds of SAR in which users learn whether to take part (section VI-B pre-mechanism).

    Each round the participants' colluding set is drawn, every slice gets its own uniform order,
    the chain runs with equilibrium noise and the coalition attacks every honest participant on
    the simulated messages. Each user then observes whether its neighbours in the slices'
    sequences colluded, and opts out once its estimate of ``p`` passes ``colluder_threshold``
    for the current number of participants.

    Attributes:
        config: the validated configuration.
        beta: the users' preferences.
        users: the ``SARUser`` agents (an ``AgentSet``, by index); ``adversary``: the
            ``ColludingAdversary``.
        attack: the last attacked round: participants' ``ids``, each slice's ``order``
            (``(N, k)`` participant positions), ``colluding`` flags, the honest ``victims``
            and ``success`` (``(victims, N)``: the slice was reconstructed); ``None`` before.
    """

    def __init__(self, config: SARConfig, seed: int | np.random.SeedSequence | None = None
                 ) -> None:
        super().__init__(config, seed)
        c = config
        self.beta = (np.array(c.beta) if c.beta is not None
                     else self.rng.uniform(0.0, c.beta_max, c.K))
        self.users = SARUser.create_agents(self, c.K, index=list(range(c.K)))
        self.adversary = ColludingAdversary(self, c.attacker)
        self.slices, self.sizes = _slice_index(c.d, c.N)
        self.round_stats: dict[str, float] = {}
        self.attack: dict[str, NDArray] | None = None
        self.ended = False  # fewer than three participants are left
        self.datacollector = mesa.DataCollector(model_reporters={
            key: (lambda m, key=key: m.round_stats[key])
            for key in ("participants", "success_rate", "exposed_fraction", "p_estimate",
                        "threshold")})

    def step(self) -> None:
        """One round: draw colluders, run every slice's chain, attack, observe, decide."""
        participants = self.users.select(lambda u: u.participating)
        stats = {"participants": float(len(participants)), "success_rate": math.nan,
                 "exposed_fraction": math.nan, "threshold": math.nan,
                 "p_estimate": float(participants.agg("p_estimate", np.mean))
                 if len(participants) else math.nan}
        if len(participants) >= 3:
            stats.update(self._play(participants))
        else:  # Protocol 2 needs three participants: nothing happens from now on
            self.attack, self.ended = None, True
        self.round_stats = stats
        self.datacollector.collect(self)

    def _play(self, participants: mesa.agent.AgentSet) -> dict[str, float]:
        c = self.config
        ids = np.array(participants.get("index"))
        k = ids.size
        colluding = _draw_colluders(c, self.rng, (), ids)
        for user, flag in zip(participants, colluding, strict=True):
            user.colluding = bool(flag)
        victims = np.flatnonzero(~colluding)
        data = self.rng.uniform(-c.Delta, c.Delta, (1, k, c.d))
        out = play_rounds(c, self.rng, self.beta[ids], colluding[None], victims[None], data)
        success = out["success"][0]  # (victims, N)
        self.attack = {"ids": ids, "order": out["order"][0], "colluding": colluding,
                       "victims": victims, "success": success}
        self.adversary.record(success)
        self._observe(participants, out["order"][0], colluding)
        threshold = colluder_threshold(k, c.attacker)
        participants.do("decide", threshold, c.min_observations, c.confidence)
        v = victims.size
        return {"success_rate": float(success.mean()) if v else math.nan,
                "exposed_fraction": float((success @ self.sizes / c.d).mean()) if v else math.nan,
                "threshold": threshold}

    def _observe(self, participants: mesa.agent.AgentSet, order: NDArray,
                 colluding: NDArray) -> None:
        """Each participant sees whether its predecessor and successor in each slice colluded;
        ``order`` is ``(N, k)`` (participant index at each position), ``colluding`` ``(k,)``."""
        k = colluding.size
        seq_colluding = colluding[order]
        pad = np.zeros((order.shape[0], 1), dtype=bool)
        neighbours = (np.concatenate([pad, seq_colluding[:, :-1]], axis=1).astype(int)
                      + np.concatenate([seq_colluding[:, 1:], pad], axis=1))
        per_position = np.full(k, 2)
        per_position[[0, -1]] = 1  # the ends of a sequence have one neighbour
        seen = np.zeros(k, dtype=int)
        colluders = np.zeros(k, dtype=int)
        for n in range(order.shape[0]):
            np.add.at(seen, order[n], per_position)
            np.add.at(colluders, order[n], neighbours[n])
        for user, s, c in zip(participants, seen, colluders, strict=True):
            user.observe(s, c)

    def predicted(self) -> dict[str, float]:
        """The theory for the configured ``K`` and ``p``, and the participation level at which
        the threshold of eq (33) admits ``p``."""
        c = self.config
        admitted = [k for k in range(3, c.K + 1) if colluder_threshold(k, c.attacker) >= c.p]
        return {**c.predicted(), "threshold": colluder_threshold(c.K, c.attacker),
                "largest_admitting_K": float(max(admitted)) if admitted else math.nan}
