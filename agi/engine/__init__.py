"""The engine: the one door (a run opened from its specification), the loop, assembly."""
