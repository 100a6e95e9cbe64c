"""`python -m agi` runs the command line."""

from agi.cli import main

raise SystemExit(main())
