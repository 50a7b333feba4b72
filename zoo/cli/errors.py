"""A user mistake that the command line finds itself, and the exit status
with which `zoo` reports every user mistake (`zoo.errors.ZooUserError`)."""

from zoo.errors import ZooUserError

USER_ERROR = 2


class UserError(ZooUserError):
    """A mistake of the user's found by the command line itself."""
