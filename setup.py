"""Only for the man page of editable installs: setuptools' editable wheel installs data files
when the distribution answers `has_data()`, a method only distutils' install command has, so
`pip install -e .` would leave share/man/man1/agi.1 out. Everything else is in pyproject.toml."""

from setuptools import setup
from setuptools.dist import Distribution


class WithDataFiles(Distribution):
    def has_data(self) -> bool:
        return self.has_data_files()


setup(distclass=WithDataFiles)
