"""Sessions and the context window: the session directory and its files, the size of a request
(`estimate`), and compaction (what a summary replaces, and when to make one)."""
