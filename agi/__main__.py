"""`python -m agi` runs the command line."""

from agi.frontends.cli import main

raise SystemExit(main())
