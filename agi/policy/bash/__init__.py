"""The Bash judge: a command line parsed and its words evaluated as bash would."""
