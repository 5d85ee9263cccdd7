"""Population evaluation of players from their games: the meta-game, Nash averaging, alpha-Rank and the
cycles of the "beats" relation, with intervals from a bootstrap over games (numpy/scipy).

A rating puts players on one line; the populations an arena meets (self-play leagues, checkpoints of several
libraries, scripted players) often do not lie on one. What is estimated here, from games
(:class:`mosaic.scoring.ratings.Game`, draws counting half a win):

- the *meta-game* (:func:`meta_game`): an antisymmetric payoff matrix ``A`` over the players, ``A[i, j]`` i's
  payoff against j. By default (``payoff="logit"``) the log-odds of i's empirical score against j with a
  continuity correction of half a game each way, ``log((s + 1/2) / (n - s + 1/2))`` (s: i's wins plus half
  its draws in the n games of the pairing), which is ``logit((s + 1/2) / (n + 1))``: finite at 0 and n wins,
  and exactly antisymmetric. ``payoff="win_rate"``: ``s / n - 1/2``. Both are 0 exactly when the pairing
  was even. Every pairing must have been played: the solvers need the whole matrix, and a missing pairing
  is refused (a :class:`ValueError` naming it) rather than guessed as even. Several games (connect four,
  chess, ...) pool into one table (:func:`pooled_meta_game`) as the mean of the per-game matrices, each game
  weighing the same, over the players who played in every one of them (the others are dropped and named).
- *Nash averaging* (Balduzzi et al., NeurIPS 2018, "Re-evaluating evaluation", :func:`nash_averaging`): the
  maximum-entropy Nash equilibrium ``p`` of the symmetric zero-sum game ``A`` (its value is 0, as ``A`` is
  antisymmetric), each player's Nash weight ``p_i`` and its Nash rating ``(A p)_i``, its expected payoff
  against the equilibrium mixture: 0 for the players in the support, below 0 for those the mixture beats.
  Adding a copy of a player leaves the ratings as they were, which is its point. Solved with scipy alone
  (:mod:`~mosaic.scoring.population.nash`: one linear programme for the support, then the null space, or
  SLSQP where redundant players leave a set of equilibria); OpenSpiel's ``nash_averaging`` needs cvxpy and its
  ``alpharank`` imports matplotlib, neither a dependency here: tests/test_population.py checks both against
  OpenSpiel's numbers on fixed tables.
- *alpha-Rank* (Omidshafiei et al., Scientific Reports 2019, :func:`alpha_rank`), single population: a
  Markov chain over monomorphic populations of ``m`` players (``POPULATION`` = 50); from population s, a
  mutant r (chosen uniformly among the other players) takes over with the Fermi fixation probability at
  ranking intensity ``alpha`` (``ALPHA`` = 10, per unit of payoff: with ``payoff="win_rate"``, whose scale
  near an even pairing is a quarter of the logit's, the same alpha selects four times more weakly). The
  stationary distribution is the mass of each player; the ranking orders by it. At alpha = 10 and m = 50 a
  pairing 0.1 logit apart (52.5%) already lets the chain move almost only one way (fixation 0.64 against
  about 1e-22), which is the paper's regime of large alpha; :func:`alpha_sweep` shows the mass against alpha
  and the alpha from which the ranking no longer changes.
- *cycles* (:func:`cycles`): i beats j when ``A[i, j] > 0`` (its score against j is above one half; an even
  pairing is a tie, no edge either way); whether the relation is transitive (here: no cycle, so the players
  can be ordered with no one beating anyone above it); the strongly connected components of the beats graph
  (Tarjan's algorithm), and its elementary cycles, enumerated up to a cap. In a pooled table i beats j when
  its mean payoff over the games is above 0.

Uncertainty (:func:`population_bootstrap`): games are resampled within each pairing, with replacement, as the
ratings' bootstrap does (:func:`mosaic.scoring.ratings.rating_bootstrap`, whose resampling is used), from
``np.random.default_rng(seed)``; every measure is recomputed on each resample. It gives percentile intervals
(:class:`mosaic.scoring.interval.Interval`) for the Nash weights, Nash ratings and alpha-Rank masses, the share
of resamples in which each player is in the Nash support, the share with any cycle, and for each cycle (of the
point estimate or seen in a resample) the share in which it appears. Pairings with fewer than ``MIN_GAMES``
(5) games are flagged: with so few games the bootstrap cannot tell their result, and whatever rests on it, from
chance. Percentile intervals of quantities that jump (a Nash weight that is 0 in some resamples, an alpha-Rank
mass near 0 or 1) say how much the answer moves, not a coverage guarantee. Each resample solves its own
equilibrium (a linear programme only when its support is new); a thousand resamples of a few players take
about a second.

Modules: :mod:`~mosaic.scoring.population.metagame`, :mod:`~mosaic.scoring.population.nash`,
:mod:`~mosaic.scoring.population.alpharank`, :mod:`~mosaic.scoring.population.cycles`,
:mod:`~mosaic.scoring.population.bootstrap`; their public names are imported here.
"""

from __future__ import annotations

from mosaic.scoring.population.alpharank import ALPHA, POPULATION, SWEEP_ALPHAS, AlphaRank, AlphaSweep, alpha_rank, \
    alpha_sweep
from mosaic.scoring.population.bootstrap import PopulationBootstrap, population_bootstrap
from mosaic.scoring.population.cycles import MAX_CYCLES, Cycles, cycles
from mosaic.scoring.population.metagame import MIN_GAMES, PAYOFFS, MetaGame, meta_game, pooled_meta_game
from mosaic.scoring.population.nash import Nash, nash_averaging

__all__ = ["ALPHA", "MAX_CYCLES", "MIN_GAMES", "PAYOFFS", "POPULATION", "SWEEP_ALPHAS", "AlphaRank", "AlphaSweep",
           "Cycles", "MetaGame", "Nash", "PopulationBootstrap", "alpha_rank", "alpha_sweep", "cycles", "meta_game",
           "nash_averaging", "pooled_meta_game", "population_bootstrap"]
