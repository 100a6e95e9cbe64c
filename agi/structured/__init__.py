"""Structured answers: the `--schema` DSL, JSON Schema validation, and the ghost exchange that
asks for JSON (also for `--exit-code`)."""
