"""The front ends: each turns its own inputs into one overlay of options and drives runs.

`cli` (the command line), `repl` (`agi -i`), and the views they share: `render` (the terminal
view on stderr), `output` (`--output json|jsonl`), `transcript` (`--list-sessions`, `--show`).
Neovim's front end is `agi.frontends.nvim`."""
