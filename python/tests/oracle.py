"""Running Icechunk 2.3.0 (the oracle) in its own interpreter, for tests that check
what Icechunk reads of (or writes to) a repository floe wrote."""

import subprocess

#: Appended to every script: Icechunk 2.3.0's extension can crash (SIGSEGV) while
#: the interpreter shuts down, after the script's work is done and printed (seen in
#: CI), so the script leaves without the interpreter's shutdown. A script that
#: raises never gets here and fails as usual.
_LEAVE = "\nimport os as _os, sys as _sys\n_sys.stdout.flush()\n_sys.stderr.flush()\n_os._exit(0)\n"


def run_icechunk(argv: list[str]) -> subprocess.CompletedProcess:
    """Runs `argv` (the Icechunk interpreter, options, `-c`, a script and its
    arguments) with text output captured; raises `CalledProcessError` when it
    fails."""
    argv = list(argv)
    at = argv.index("-c") + 1
    argv[at] = argv[at] + _LEAVE
    return subprocess.run(argv, capture_output=True, text=True, check=True)
