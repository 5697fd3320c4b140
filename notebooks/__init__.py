"""perfkit's guided notebooks and dashboard, installed as the resource package
``perfkit._notebooks``.

This file only makes the folder a package, so that ``pyproject.toml`` can map ``notebooks/``
into the wheel (``[tool.setuptools.package-dir]``) and ``importlib.resources`` can find it in
every installation (see ``perfkit/resources.py``). ``perfkit notebooks DIR`` copies the
guided notebooks into a working folder.
"""
