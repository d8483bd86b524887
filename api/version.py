"""Orgdeck's version: the one place it is written. pyproject.toml reads it for the package
(`[tool.setuptools.dynamic]`), the service answers it in /api/health, `orgdeck --version` prints it
and the console shows it in its sidebar."""

VERSION = "0.2.0"
