"""The one error type config loading raises; its message always says where the problem is."""

from __future__ import annotations


class ConfigError(ValueError):
    """A config that kube-scheduler (or koordsched) would refuse.

    ``where`` is the field path in the config (``profiles[0].plugins.filter.enabled[2]``),
    ``detail`` what is wrong there, ``source`` the file it came from when there is one.
    """

    def __init__(self, where: str, detail: str, source: str | None = None) -> None:
        self.where = where
        self.detail = detail
        self.source = source
        super().__init__(": ".join(part for part in (source, where, detail) if part))

    def in_source(self, source: str | None) -> ConfigError:
        """The same error, attributed to ``source`` (a file path)."""
        return ConfigError(self.where, self.detail, source)
