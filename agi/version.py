"""agi's version: a leaf module, so that whatever reports it need not import the package back."""

__version__ = "0.1.0"
