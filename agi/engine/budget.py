"""A run's meter that also spends a budget shared with other runs (a batch's --max-cost, given
in the spec as `budget`): checked before each model call, added to after it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agi.providers.cost import Meter

if TYPE_CHECKING:
    from agi.engine.spec import Budget
    from agi.messages import Usage


class BudgetedMeter(Meter):
    """The run's own meter (its own --max-cost too), every call also counted in `budget`; no
    call is made once the budget is spent (its error, raised)."""

    def __init__(self, prices: dict[str, Any], max_cost: float | None, budget: Budget):
        super().__init__(prices, max_cost)
        self.budget = budget

    def check(self, label: str, model: str, caller: object = None) -> None:
        super().check(label, model, caller)
        error = self.budget.reached()
        if error is not None:
            raise error

    def record(self, label: str, model: str, usage: Usage | None, caller: object = None) -> Usage:
        call = super().record(label, model, usage, caller)
        self.budget.add(call)
        return call
