"""One exception type per failure family; messages say what to do next."""


class VocalgradError(Exception):
    """Base class: the CLI prints these without a traceback."""


class AudioError(VocalgradError):
    """An audio file is unreadable, empty, silent, too short or otherwise unusable."""


class SourceError(VocalgradError):
    """A speech source spec or folder cannot be resolved."""


class ConfigError(VocalgradError):
    """A build config or CLI option is malformed or inconsistent."""


class DatasetError(VocalgradError):
    """A dataset folder is missing files or does not follow the on-disk schema."""


class BusyError(VocalgradError):
    """Another process is writing the same run or build folder."""

