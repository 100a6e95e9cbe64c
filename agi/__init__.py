"""agi: a lightweight LLM agent that behaves like a UNIX tool.

Importing the package does nothing else: the engine is in `agi.engine.loop`, the command line in
`agi.frontends.cli.main`.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
