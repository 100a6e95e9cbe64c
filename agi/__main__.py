"""`python -m agi` runs the command line."""

from agi.frontends.cli.main import main

raise SystemExit(main())
