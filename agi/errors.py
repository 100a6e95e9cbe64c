"""The one exception tree of agi; each error knows the exit code it ends the run with.

    AgiError                      1   generic failure
    ├── UsageError                2   bad option, bad prompt, bad file given on the command line
    │   └── ConfigError           2   bad or missing configuration (no model, bad config.toml)
    ├── ProviderError             3   the model provider failed after retries
    ├── LimitReached              4   --max-steps, --timeout or --max-cost
    │   ├── StepLimit
    │   ├── TimeLimit
    │   └── CostLimit
    ├── SchemaError               5   no valid JSON under --schema (also named SchemaFailed)
    ├── HookStopped               6   a hook stopped the run
    └── Interrupted             130   SIGINT (143 for SIGTERM)
        └── Cancelled           130   the exchange was cancelled (Neovim's :AgiCancel, shutdown)

Only `agi.frontends.cli.main` turns these into messages and exit codes. The Python API raises
them as they are (`agi.Error` is AgiError; docs/python.md): each has its `exit_code` and its one
line, and one that ended a run after it began carries that run's `result` so far.

Apart from the tree, and not an AgiError:

    ToolError                         a tool failed; the model reads it as an `Error: …` result

Tools raise ToolError and the toolbox turns it into the call's result, so it never ends a run.
"""

TYPE_CHECKING = False  # not typing's: `agi --version` imports this module and not typing
if TYPE_CHECKING:
    from agi.engine.result import RunResult


class AgiError(Exception):
    """What ended a run: `exit_code` is the code the command line exits with, `message` the
    one line it writes after `agi: `; `result` is the `agi.Result` of the run so far (its
    session, steps and usage) when it had begun, else None."""

    exit_code = 1
    result: "RunResult | None" = None  # set by agi.engine.run.carry

    @property
    def message(self) -> str:
        return str(self)


class UsageError(AgiError):
    """A bad option, prompt, file or configuration (exit 2); nothing was sent to a model."""

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
    """A limit was reached: max_steps, timeout or max_cost (exit 4)."""

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


class SchemaError(AgiError):
    """No valid JSON for the schema after the allowed attempts (exit 5)."""

    exit_code = 5


SchemaFailed = SchemaError  # the name the engine has used


class HookStopped(AgiError):
    """A hook stopped the run: `continue: false`, or a blocked UserPromptSubmit (exit 6)."""

    exit_code = 6


class Interrupted(AgiError):
    """The run was interrupted by a signal; the exit code is 128 + the signal number."""

    exit_code = 130

    def __init__(self, signum: int = 2):
        import signal

        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.exit_code = 128 + signum


class Cancelled(Interrupted):
    """The run was cancelled (exit 130): a library's stream left early or its task cancelled,
    Neovim's :AgiCancel, an editor's session/cancel, a shutdown."""

    def __init__(self) -> None:
        AgiError.__init__(self, "cancelled")
        self.exit_code = 130


class ToolError(Exception):
    """A tool failed in a way the model should read about; becomes an `Error: …` result."""
