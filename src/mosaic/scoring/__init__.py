"""Scoring: how MOSAIC turns runs and games into numbers with honest intervals, in one package.

- :mod:`mosaic.scoring.interval`: :class:`~mosaic.scoring.interval.Interval`, the one interval type (a number's
  or a band's), and Student's t interval of a mean (pure Python).
- :mod:`mosaic.scoring.curves`: learning curves from telemetry: metric keys, a run's series, smoothing,
  interpolation (pure Python).
- :mod:`mosaic.scoring.stats`: aggregate scores of runs (mean, median, IQM, optimality gap, probability of
  improvement, performance profiles) with stratified-bootstrap intervals, and the band of a curve over runs
  (numpy).
- :mod:`mosaic.scoring.ratings`: Bradley-Terry ratings of players from their games, with bootstrap intervals,
  the crosstable, sequential Elo and openskill (numpy, scipy).
- :mod:`mosaic.scoring.population`: a population's meta-game from its games, Nash averaging, alpha-Rank and the
  cycles of the beats relation, with bootstrap intervals, several games pooled (numpy, scipy).
- :mod:`mosaic.scoring.expected_best`: a hyperparameter search's expected best score as a function of the trials
  spent, with its bootstrap band, and the best so far (numpy, scipy).

Importing the package imports none of them: the pure-Python modules stay usable without numpy.
"""
