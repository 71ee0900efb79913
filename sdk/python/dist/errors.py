"""dist's errors as Python exceptions: the code and the one-line message."""

import enum


class ErrorCode(enum.IntEnum):
    """dist_error_code_t (the numbers are absl::StatusCode's)."""

    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16
    REVOKED = 17


class Error(RuntimeError):
    """A failed dist call. `code` is an ErrorCode (or the raw number of a code
    newer than this package), `message` the library's one-line message.
    A RuntimeError, as torch.distributed's errors are."""

    def __init__(self, code, message):
        try:
            code = ErrorCode(code)
        except ValueError:
            pass
        self.code = code
        self.message = message
        name = code.name if isinstance(code, ErrorCode) else "code %d" % code
        super().__init__("%s: %s" % (name, message))
