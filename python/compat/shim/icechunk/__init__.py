"""Presents floe under Icechunk's import name for the compatibility run.

This is exactly what a user does (``floe.install_as_icechunk()``), nothing more: every
name the tests find is floe's own. The only addition is where ``icechunk.testing``
(Icechunk's pure-Python test helpers, copied into this folder at run time from the
icechunk 2.3.0 wheel, never committed) is found: the folder holding this file is
appended to the package path so that ``import icechunk.testing`` resolves here.
"""

import os
import sys

import floe

floe.install_as_icechunk()
_package = sys.modules["icechunk"]
_here = os.path.dirname(os.path.abspath(__file__))
if _here not in _package.__path__:
    _package.__path__.append(_here)
