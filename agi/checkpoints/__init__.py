"""Working-directory snapshots of a session's turns, and --rewind."""
