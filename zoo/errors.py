"""The one base class of the errors that mean a user mistake, not a bug.

The command line reports these in one line, without a traceback. This module
imports nothing, so the command line can catch them before TensorFlow loads.
"""


class ZooUserError(ValueError):
    """Bad input from the user: a name, a path, a file or an option."""
