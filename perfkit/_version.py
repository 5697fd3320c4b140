"""perfkit's version, in a module of its own so that any part of the package can read it
without importing the top-level package (which imports every part)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
