"""`agi.Budget`: one `max_cost` for several runs (threads, tasks), kept by a meter per run."""

from __future__ import annotations

import threading

from agi.engine.budget import BudgetedMeter
from agi.errors import CostLimit, UsageError
from agi.messages import Usage
from agi.providers.cost import REPORTS_COST, missing_price, money


class BudgetSpent(CostLimit):
    """The budget is spent: a run stops before its next model call, or never starts (exit 4)."""

    def __init__(self, spent: str, limit: str):
        super().__init__(spent, limit)
        self.args = (f"{self} for the budget (agi.Budget)",)


class Budget:
    """USD that the runs it is given to (`budget=`) may spend together: the cost of their model
    calls is summed, each call checks it first, and once it is reached a run's next call raises
    `agi.LimitReached` (as `max_cost` does for one run). Thread-safe; the runs' models need
    prices, as under `max_cost`."""

    def __init__(self, usd: float):
        if not isinstance(usd, (int, float)) or isinstance(usd, bool) or not usd > 0:
            raise ValueError(f"agi.Budget needs a positive number of USD, not {usd!r}")
        self.limit = float(usd)
        self._total = Usage()
        self._lock = threading.Lock()

    @property
    def spent(self) -> float | None:
        """USD spent so far (None once a call's cost could not be known)."""
        with self._lock:
            return 0.0 if self._total.empty else self._total.cost

    @property
    def usage(self) -> Usage:
        """Every model call of the runs so far, summed."""
        with self._lock:
            return Usage() + self._total

    def add(self, usage: Usage) -> None:
        with self._lock:
            self._total.add(usage)

    def reached(self) -> BudgetSpent | None:
        """The error a run gets once the budget is spent (None while it is not)."""
        spent = self.spent
        if spent is None:  # a call of unknown cost: the budget can no longer be kept
            return BudgetSpent("an unknown amount", money(self.limit))
        return BudgetSpent(money(spent), money(self.limit)) if spent >= self.limit else None

    def __repr__(self) -> str:
        return f"agi.Budget({self.limit:g}, spent={self.spent})"


class BudgetMeter(BudgetedMeter):
    """The engine's budgeted meter (agi.engine.budget), whose models need prices up front, as
    under `max_cost`: a missing price names agi.Budget."""

    def require(self, label: str, model: str) -> None:
        super().require(label, model)
        if self.price(label, model) is None and label.partition(":")[0] not in REPORTS_COST:
            raise UsageError(missing_price(label).replace("--max-cost", "agi.Budget"))
