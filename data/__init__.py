"""perfkit's bundled data, installed as the resource package ``perfkit._data``.

This file only makes the folder a package, so that ``pyproject.toml`` can map ``data/`` into
the wheel (``[tool.setuptools.package-dir]``) and ``importlib.resources`` can find it in every
installation (see ``perfkit/resources.py``). Use ``perfkit.samples()`` to list the profiles.
"""
