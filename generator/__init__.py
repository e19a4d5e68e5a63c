"""goldtune: GPU-server hardware + workload profile -> reviewed bundle of boot-time OS tuning."""

try:
    # written when the package is built or installed (pyproject.toml: the hatch-vcs hook)
    from generator._version import __version__ as __version__
except ModuleNotFoundError:  # a source tree that was never built or installed
    from generator.release import RELEASE

    __version__ = RELEASE  # the release the repository declares (generator/release.py)
TOOL = "goldtune"
