"""What the model sees of a long session: compaction, summaries, windows, estimates."""
