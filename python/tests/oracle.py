"""Running Icechunk 2.3.0 (the oracle) in its own interpreter, for tests that check
what Icechunk reads of a repository floe wrote."""

import subprocess
import sys


def run_icechunk(argv: list[str]) -> subprocess.CompletedProcess:
    """Runs `argv` (the Icechunk interpreter and its arguments), text output
    captured. An Icechunk process killed by a signal (a rare SIGSEGV of Icechunk's
    own extension was seen once in CI, on a repository that Icechunk read correctly
    in every other run) is run once more, and the crash is reported on stderr; a
    second crash, like any other failure, raises `CalledProcessError`."""
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    if out.returncode < 0:
        print(f"oracle: Icechunk died from signal {-out.returncode}; running it again:\n"
              f"{out.stderr[-2000:]}", file=sys.stderr)
        out = subprocess.run(argv, capture_output=True, text=True, check=False)
    out.check_returncode()
    return out
