"""Keeping a session within the model's window, on the run's side: when to compact (before a
request that would pass the threshold, after a refusal for length, or when asked), and what a
compaction does around `agi.context.summarize` (PreCompact hooks, the ghost summary requests, the
record,
SessionStart hooks with `source: "compact"`)."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, TypeVar

from agi.context.estimate import Estimator
from agi.context.windows import configured_window, known_window, window_for
from agi.engine.absent import NO_HOOKS
from agi.errors import ProviderError
from agi.messages import Notice, Usage, drain, user
from agi.providers.errors import too_long

T = TypeVar("T")

if TYPE_CHECKING:
    from agi.context.summarize import Compaction
    from agi.engine.seams import HookEvents, ModelStream
    from agi.options.settings import Settings
    from agi.sessions.session import Session

LISTING_FLOOR = 2048  # tokens: below this no model's window is at risk, so no server is asked


TRUNCATION_FLOOR = 2048  # tokens: below this no server's context cuts a prompt
TRUNCATED = 0.6  # a prompt count under this share of the (calibrated) estimate: a cut prompt
# tokens: a request this large to a model whose window agi does not know is said before it is
# sent (docs: long-sessions); few models take it, and none is known to agi without its window
UNKNOWN_LARGE = 131_072


def truncation_warning(counted: int, expected: int) -> str:
    """What to say when a server read far fewer prompt tokens than were sent (Ollama's
    OpenAI-compatible endpoint drops the oldest messages beyond its num_ctx, silently)."""
    return (
        f"the server counted {counted} prompt tokens for a request of about {expected}: it "
        "probably cut the conversation to fit its context; give it a longer context (Ollama: "
        "OLLAMA_CONTEXT_LENGTH, or -m ollama:MODEL, which sizes num_ctx to each request) or set "
        "context_window in the config so that agi compacts in time"
    )


class Compactor:
    """Compaction for one agent's session: automatic (unless `compact = "off"`) and manual."""

    def __init__(
        self,
        settings: Settings,
        session: Session,
        transport: ModelStream,
        hooks: HookEvents = NO_HOOKS,
        warn: Callable[[str], None] = lambda text: None,
    ):
        self.settings, self.session, self.transport = settings, session, transport
        self.hooks, self.warn = hooks, warn  # PreCompact and SessionStart hooks
        self.auto = settings.window.compact
        model = settings.model
        self.known = configured_window(
            model.label, model.model, settings.window.windows
        ) or known_window(model.model)
        self.asked = self.known is not None  # the server's listing: asked at most once a run
        self.estimator = Estimator()  # the size of each request
        self.usage = Usage()  # the summary requests' (the loop's own calls are the agent's)
        self.deferred: list[str] | None = None  # warnings held while a refused request is resent
        self.truncation_told = False  # the warning that the server cut the prompt, given once
        self.unknown_told = False  # the warning that a large request goes to an unknown window

    def window(self, tokens: int) -> int | None:
        """The model's window; an unknown one is looked up (cached) once the size matters."""
        if self.known is None and not self.asked and tokens > LISTING_FLOOR:
            self.asked = True
            m = self.settings.model
            self.known = window_for(
                m.label,
                m.model,
                self.settings.window.windows,
                self.settings.state,
                m.base_url,
                m.api_key,
                ollama=m.provider == "ollama",
            )
        return self.known

    def before(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> Generator[Notice, None, bool]:
        """Compact first when this request would pass the threshold of the window."""
        if not self.auto:
            return False
        tokens = self.estimator(messages, tools)
        window = self.window(tokens)
        if window is None and tokens > UNKNOWN_LARGE and not self.unknown_told:
            self.unknown_told = True
            self.warn(
                f"this request is about {tokens} tokens and the context window of "
                f"{self.settings.model.label} is unknown: it is sent whole (set context_window "
                "in the config to have agi compact it to fit, or send less)"
            )
        if window is None or tokens <= self.settings.window.threshold * window:
            return False
        yield from self.run("auto")
        return True

    def observe(self, prompt_tokens: int) -> None:
        """Calibrate the estimate with the provider's count for the request last estimated;
        a count far below it means the server cut the prompt: say so, once."""
        if not prompt_tokens:
            return
        expected = self.estimator.calibrator.apply(self.estimator.last)
        if expected > TRUNCATION_FLOOR and prompt_tokens < TRUNCATED * expected:
            if not self.truncation_told:
                self.truncation_told = True
                self.warn(truncation_warning(prompt_tokens, expected))
            return  # no calibration: the server did not read the whole request
        self.estimator.observe(prompt_tokens)

    def refused(self, error: ProviderError) -> Generator[Notice, None, None]:
        """A request refused for its length: compact, so that it can be sent once more."""
        if not too_long(error):
            raise error
        if not self.auto:
            raise ProviderError(
                f"{error} (the conversation is longer than the model's context window; "
                "automatic compaction is off: run agi --compact on this session)",
                error.status,
            ) from error
        # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
        from agi.context.summarize import reactive_window

        window = reactive_window(self.known, str(error), self.estimator.last)
        self.deferred = []  # said once the request is sent again: a failure then says it all
        yield from self.run("auto", window=window)

    def sent_again(self) -> None:
        """The request compacted after a refusal went through: now say what was deferred."""
        for warning in self.deferred or []:
            self.warn(warning)
        self.deferred = None

    def still_too_long(self, error: ProviderError) -> ProviderError:
        """The request refused again after compacting: one message for both."""
        self.deferred = None
        if not too_long(error):
            return error
        return ProviderError(
            f"the request is still too long for the model after compacting the conversation: "
            f"{error}",
            error.status,
        )

    def resend_once(
        self, send: Callable[[], Generator[Any, None, T]], may: Callable[[], bool] = lambda: True
    ) -> Generator[Any, None, T]:
        """Send a request; refused for its length (and `may()` still true): compact, then send
        it once more. The one place where the protocol lives, for the loop and the ghosts."""
        try:
            return (yield from send())
        except ProviderError as e:
            if not may():
                raise
            yield from self.refused(e)
        try:
            result = yield from send()
        except ProviderError as again:
            raise self.still_too_long(again) from again
        self.sent_again()
        return result

    def run(
        self, trigger: str, focus: str = "", window: int | None = None
    ) -> Generator[Notice, None, Compaction | None]:
        """Summarise the older part of the view and append the record; None: nothing to do."""
        yield Notice("compacting the conversation")
        self.hooks.pre_compact(trigger, focus)
        # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
        from agi.context.summarize import compact

        done = compact(
            self.session.view(),
            self.ask,
            trigger,
            window or self.known,
            self.estimator.measure,
            focus,
            bytes_per_token=self.estimator.effective_bytes_per_token,
        )
        if done is None:
            return None
        if done.mechanical:
            warning = f"{done.warning}; the conversation was compacted mechanically instead"
            if self.deferred is None:
                self.warn(warning)
            else:
                self.deferred.append(warning)
        kept = done.kept
        context = self.hooks.session_start("compact", self.settings.model.label)
        if context:  # SessionStart's context is stored right after the summary
            kept = [user(context), *kept]
        stored = self.session.append_compaction(done.record, kept)
        self.estimator.last = 0  # the estimate was of the view before: no count can be compared
        self.session.trace({"type": "compaction", **stored["compaction"]})
        return done

    def ask(self, messages: list[dict[str, Any]]) -> str:
        """One summary request: a ghost exchange (in the trace, never in the session). A summary
        cut off at the output limit is no summary."""
        reply = drain(self.transport.stream(messages, [], mark={"ghost": True}))
        if reply.usage is not None:
            self.usage.add(reply.usage)
        if reply.finish_reason == "length":
            raise ProviderError("the model's summary was cut off at its output limit")
        return str(reply.text)
