"""The one exception tree of agi; each error knows the exit code it ends the run with.

    AgiError                      1   generic failure
    ├── UsageError                2   bad option, bad prompt, bad file given on the command line
    │   └── ConfigError           2   bad or missing configuration (no model, bad config.toml)
    ├── ProviderError             3   the model provider failed after retries
    ├── LimitReached              4   --max-steps, --timeout or --max-cost
    │   ├── StepLimit
    │   ├── TimeLimit
    │   └── CostLimit
    ├── SchemaFailed              5   no valid JSON under --schema
    ├── HookStopped               6   a hook stopped the run
    └── Interrupted             130   SIGINT (143 for SIGTERM)
        └── Cancelled           130   the exchange was cancelled (Neovim's :AgiCancel, shutdown)

Only `agi.frontends.cli.main` turns these into messages and exit codes.

Apart from the tree, and not an AgiError:

    ToolError                         a tool failed; the model reads it as an `Error: …` result

Tools raise ToolError and the toolbox turns it into the call's result, so it never ends a run.
"""


class AgiError(Exception):
    exit_code = 1


class UsageError(AgiError):
    exit_code = 2


class ConfigError(UsageError):
    exit_code = 2


class ProviderError(AgiError):
    """The provider failed. What it means is decided in one place, `agi.providers.errors`:
    `retryable` (the same request may succeed later), `too_long` (refused for its length: the
    caller compacts and resends), `retry_after` (seconds the provider asked to wait), `empty`
    (a stream that ended before its first chunk), `body` (the response as sent, for the trace;
    the message is one line of it)."""

    exit_code = 3

    def __init__(
        self,
        message: str,
        status: int | None = None,
        retryable: bool = False,
        *,
        body: str = "",
        too_long: bool = False,
        retry_after: float | None = None,
        empty: bool = False,
    ):
        if "\n" in message or "\r" in message:  # every exit's message is one line
            message = " ".join(message.split())
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.body = body
        self.too_long = too_long
        self.retry_after = retry_after
        self.empty = empty


class LimitReached(AgiError):
    exit_code = 4


class StepLimit(LimitReached):
    def __init__(self, steps: int):
        super().__init__(f"step limit reached: {steps} model calls (raise it with --max-steps)")


class TimeLimit(LimitReached):
    def __init__(self, seconds: float):
        super().__init__(f"time limit reached: {seconds:g} s (--timeout)")


class CostLimit(LimitReached):
    def __init__(self, spent: str, limit: str):  # amounts as agi.providers.cost.money() writes them
        super().__init__(f"cost limit reached ({spent} of {limit})")


class SchemaFailed(AgiError):
    exit_code = 5


class HookStopped(AgiError):
    exit_code = 6


class Interrupted(AgiError):
    """The run was interrupted by a signal; the exit code is 128 + the signal number."""

    def __init__(self, signum: int = 2):
        import signal

        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.exit_code = 128 + signum


class Cancelled(Interrupted):
    def __init__(self) -> None:
        AgiError.__init__(self, "cancelled")
        self.exit_code = 130


class ToolError(Exception):
    """A tool failed in a way the model should read about; becomes an `Error: …` result."""
