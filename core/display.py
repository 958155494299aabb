"""Figures that are not money, as people read them (money: ledger.display)."""


def percent(fraction: float | None, places: int = 1) -> str:
    """A fraction in [0, 1] as a percentage: 0.9734 → "97.3%"; None (not measured) → "—"."""
    if fraction is None:
        return "—"
    return f"{fraction * 100:.{places}f}%"
