"""Learners of XuanCe 1.4.4 that cannot be built under the torch this worker runs, made buildable from
outside (XuanCe's code is not changed; XuanCe looks learners up by name in ``REGISTRY_Learners``).

* ``COMA_Learner``: its ``__init__`` turns the Huber loss off (``use_huber_loss = False``) and sets
  ``huber_delta = None``; the base class (``IAC_Learner``) still builds ``nn.HuberLoss(delta=None)``,
  which torch 2.13 refuses (``TypeError: delta must be a float or int``). The loss is never used with
  ``use_huber_loss`` off, so the registered subclass builds itself while ``nn.HuberLoss`` reads a
  ``None`` delta as torch's default (1.0); outside that constructor ``nn.HuberLoss`` is torch's own.
"""

from __future__ import annotations

from typing import Any


def register() -> None:
    """Put the buildable learners in XuanCe's registry (idempotent)."""
    import torch.nn as nn
    from xuance.torch.learners import REGISTRY_Learners
    from xuance.torch.learners.multi_agent_rl.coma_learner import COMA_Learner

    if getattr(REGISTRY_Learners["COMA_Learner"], "mosaic_shim", False):
        return

    class COMALearner(COMA_Learner):
        """XuanCe's COMA learner, built with the unused Huber loss given torch's default delta."""

        mosaic_shim = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            real = nn.HuberLoss

            def huber_loss(*a: Any, delta: Any = 1.0, **k: Any) -> nn.HuberLoss:
                return real(*a, delta=1.0 if delta is None else delta, **k)

            nn.HuberLoss = huber_loss  # type: ignore[assignment, misc]
            try:
                super().__init__(*args, **kwargs)
            finally:
                nn.HuberLoss = real  # type: ignore[misc]
            assert not self.use_huber_loss, "COMA's learner turns the Huber loss off"

    REGISTRY_Learners["COMA_Learner"] = COMALearner
