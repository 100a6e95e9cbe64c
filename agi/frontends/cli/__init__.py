"""The command line: flags, one-shot runs, the REPL, the read-only views."""
