"""The command line: options, stdin, the run, and the only place errors become messages."""

from __future__ import annotations

import argparse
import signal
import sys
import time

from agi.errors import AgiError, CostLimit, Interrupted, UsageError
from agi.frontends.cli.flags import build_parser, flags_layer, rewinding, rewrite, sdk_mode
from agi.policy.decoding import from_argv, from_bytes
from agi.process import (
    OutputFailed,
    arm_alarm,
    end_run,
    exit_now_if_stuck,
    flush_stdout,
    hide_keys,
    interrupt_on,
    notice_if_silent,
    read_stdin,
    silence_stdout,
    standard_streams,
)

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: --version and --help import neither typing
if TYPE_CHECKING:  # nor pathlib nor the engine
    from agi.engine.run import Run
    from agi.options.settings import Settings


def read_prompt(args: argparse.Namespace, limit: int | None = None) -> str:
    """The prompt words, with stdin appended as a context block (or stdin alone); bytes that
    are not UTF-8 (`agi $'caf\\xe9'`) become U+FFFD. stdin is read up to `limit` bytes (the
    caller has armed --timeout)."""
    prompt = " ".join(from_argv(word) for word in args.prompt).strip()
    stdin = sys.stdin
    piped = ""
    if not args.no_stdin and stdin is not None and not stdin.isatty():
        if prompt:  # a supervisor may leave stdin open: say so after a silence (docs: volume)
            notice_if_silent(stdin.buffer)
        piped = from_bytes(read_stdin(stdin.buffer, limit))
    if prompt and piped.strip():
        return f"{prompt}\n\n<stdin>\n{piped.rstrip()}\n</stdin>"
    if prompt:
        return prompt
    if piped.strip():
        return piped.strip()
    raise UsageError("no prompt: give it as arguments or on stdin (see agi --help)")


def main(argv: list[str] | None = None) -> int:
    """`agi`: the run, then its cleanup (SessionEnd hooks, what the tools started) whatever
    happened. SIGHUP is taken like SIGTERM (exit 129); a signal during the cleanup cuts it
    short, and after a finished run it still sets the exit code (docs: exit-codes)."""
    started = time.monotonic()
    if argv is None:  # the real process, not a test calling main() in-process
        standard_streams()
    interrupt_on(signal.SIGTERM, signal.SIGHUP)
    runs: list[Run] = []
    code = invoke(argv, started, runs)
    cut = end_run(runs[0]) if runs else None
    if cut is not None and code == 0:  # the answer was written: no second result object
        code = fail(cut, runs[0], result=False)
    if argv is None:
        code = flush(code)
        exit_now_if_stuck(code)
    return code


def flush(code: int) -> int:
    """What is left for stdout, now: a failure is still reported; a reader that went away
    (EPIPE) is exit 141, quietly, as for filters killed by SIGPIPE."""
    try:
        gone = flush_stdout()
    except OutputFailed as e:
        return fail(e, None) if code == 0 else code
    return 141 if gone and code == 0 else code


def invoke(argv: list[str] | None, started: float, runs: list[Run]) -> int:
    """Parse, run, and turn what went wrong into one line and an exit code."""
    try:
        words = sys.argv[1:] if argv is None else argv
        if sdk_mode(words):  # the Claude Agent SDKs launch agi as their CLI (section 29)
            # lazy: a front end, loaded when the command line dispatches to it
            from agi.frontends.sdk.main import serve as serve_sdk

            return serve_sdk(words)
        try:
            args = build_parser().parse_args(rewrite(words))
        except SystemExit as e:  # --help, --version, a usage error: main still flushes stdout
            return e.code if isinstance(e.code, int) else int(e.code is not None)
        served = serve(args)
        return served if served is not None else one_run(args, started, runs)
    except KeyboardInterrupt:
        return fail(Interrupted(signal.SIGINT), runs[-1] if runs else None)
    except AgiError as e:
        return fail(e, runs[-1] if runs else None)
    except BrokenPipeError:  # the reader of stdout went away: end quietly, as filters do
        silence_stdout()
        return 141
    except OSError as e:  # a system failure no layer below could name better
        where = f": {e.filename}" if e.filename else ""
        return fail(AgiError(f"{e.strerror or e}{where}"), runs[-1] if runs else None)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def serve(args: argparse.Namespace) -> int | None:
    """The read-only views and the front ends that serve many runs in one process; None for
    a run of the command line's own."""
    if rewinding(args) and args.ephemeral:
        raise UsageError("--ephemeral keeps no session: it cannot be used with --rewind")
    if args.completion is not None:  # a shell's completion script, from the option table
        # lazy: a front end, loaded when the command line dispatches to it
        from agi.frontends.cli.completion import script

        sys.stdout.write(script(args.completion))
        return 0
    if args.prune is not None:  # old sessions removed (docs: volume)
        # lazy: a front end, loaded when the command line dispatches to it
        from agi.frontends.cli.prune import prune_command

        return prune_command(args)
    if args.list_sessions or args.show or rewinding(args):
        return inspect(args)
    # lazy: the option layers, after --help and --version
    from agi.options.config import check_named_config

    check_named_config()  # a named config file that does not exist: exit 2, for every front end
    if args.list_settings:  # the effective options and their sources (docs: configuration)
        # lazy: a front end, loaded when the command line dispatches to it
        from agi.frontends.cli.settings_list import list_settings

        sys.stdout.write(list_settings(args))
        return 0
    if args.acp:  # an editor drives agi: ACP on stdio until stdin closes
        # lazy: agi.frontends.acp.main loads asyncio
        from agi.frontends.acp.main import serve

        return serve(args, flags_layer(args))
    if args.mcp_serve:  # other agents call agi as an MCP tool until stdin closes
        # lazy: a front end, loaded when the command line dispatches to it
        from agi.frontends.mcp.serve import main as serve_mcp

        return serve_mcp(args)
    if args.serve is not None:  # HTTP until SIGINT/SIGTERM (docs: serve)
        # lazy: a front end, loaded when the command line dispatches to it
        from agi.frontends.serve.main import main as serve_http

        return serve_http(args, flags_layer(args))
    if args.batch is not None or args.jobs or args.batch_out or args.shard or args.batch_api:
        # lazy: a front end, loaded when the command line dispatches to it
        from agi.frontends.batch.main import batch  # many prompts, one process (section 19)

        return batch(args, flags_layer(args))
    return None


def one_run(args: argparse.Namespace, started: float, runs: list[Run]) -> int:
    """A prompt, the REPL or --compact, on one session."""
    if args.cont and (args.session or args.fork):
        raise UsageError("--continue cannot be used with --session or --fork")
    if args.compact and (args.repl or args.fork or not (args.session or args.cont)):
        raise UsageError("--compact works on a session: give -s DIR or -c (not -i, --fork)")
    if args.compact and (args.schema or args.exit_code is not None):
        raise UsageError("--compact prints the summary: it takes no --schema or --exit-code")
    if args.exit_code == "" and len(args.prompt) > 1:  # `--exit-code "tests pass" "Fix it"`
        sys.stderr.write(
            "agi: --exit-code takes criteria only with = (--exit-code=CRITERIA): the prompt "
            f"is all {len(args.prompt)} words given\n"
        )
    # lazy: a front end, loaded when the command line dispatches to it
    from agi.frontends.cli import oneshot  # after parsing: --version and --help stay light

    if args.timeout and not args.repl:  # the files the options name are read within it too
        arm_alarm(started, args.timeout)
    settings = settings_for(args)
    if settings is None:
        return 0
    if settings.ephemeral and args.repl:
        raise UsageError("--ephemeral keeps no session: it cannot be used with --repl")
    if settings.timeout and not args.repl:
        arm_alarm(started, settings.timeout)
    reads = not (args.repl or args.compact or args.list_extensions)
    prompt = read_prompt(args, settings.stdin_limit) if reads else ""  # within --timeout
    hide_keys(settings.model.api_key)  # from stdout, stderr and every child's environment
    run = oneshot.open_run(args, settings, started, runs)
    if args.repl:
        # lazy: a front end, loaded when the command line dispatches to it
        from agi.frontends.cli.repl import repl

        return repl(run)
    if args.compact:
        return oneshot.compact(run, " ".join(args.prompt).strip())
    return oneshot.one_shot(run, prompt)


def settings_for(args: argparse.Namespace) -> Settings | None:
    """The run's settings from the command line's layer; None once --list-extensions has
    printed its listing. Nothing is run: a `/command` prompt is expanded inside the run."""
    # lazy: a front end, loaded when the command line dispatches to it
    from agi.options.settings import Settings

    # lazy: a front end, loaded when the command line dispatches to it
    from agi.options.values import Options

    listing = args.list_extensions  # a listing needs no model configured
    defaults = Options(model="openai:none") if listing else None
    settings = Settings.load(flags_layer(args), defaults=defaults)
    if listing:
        # lazy: a front end, loaded when the command line dispatches to it
        from agi.claude.extensions import inventory

        sys.stdout.write(inventory(settings))
        return None
    return settings


def inspect(args: argparse.Namespace) -> int:
    """--list-sessions and --show: read-only views of the sessions; --rewind (section 18)."""
    if rewinding(args):
        # lazy: a front end, loaded when the command line dispatches to it
        from agi.frontends.cli.rewind import rewind_command

        return rewind_command(args)
    from pathlib import Path

    # lazy: a front end, loaded when the command line dispatches to it
    from agi.frontends.cli.transcript import list_sessions, show

    # lazy: a front end, loaded when the command line dispatches to it
    from agi.options.config import agi_home

    if args.list_sessions:  # a terminal gets a header and the newest 20, a pipe every line
        text = list_sessions(agi_home(), 20 if sys.stdout.isatty() else None)
    else:
        text = show(Path(args.show))
    if text:
        sys.stdout.write(text + "\n")
    sys.stdout.flush()
    return 0


def fail(error: AgiError, run: Run | None, result: bool = True) -> int:
    """The one `agi:` line (API keys redacted), and with --output json|jsonl the result object
    (`result`: not when one was already written, by a run that succeeded)."""
    message = str(error)
    if run is not None:
        try:
            if result:
                # lazy: a front end, loaded when the command line dispatches to it
                from agi.frontends.cli.oneshot import write_failure

                write_failure(run, error)
        except (AgiError, KeyboardInterrupt, OSError):
            pass
        kept = error.exit_code in (4, 129, 130, 143) and not isinstance(error, CostLimit)
        session = run.result(error).session
        if session is not None and kept:  # the contract's cost line stands alone
            message += f"; the session is kept: {session}"
        message = run.redact(message)
    view = run.view if run is not None and run.view is not None else None
    if view is not None:
        view.close()
    detail = getattr(error, "detail", "")  # a bad --schema: the text, and a caret under the fault
    # lazy: a front end, loaded when the command line dispatches to it
    from agi.frontends.views.terminal import escape_controls  # a provider's text may hold sequences

    message, detail = escape_controls(message), escape_controls(str(detail or ""))
    sys.stderr.write(f"agi: {message}\n" + (f"{detail}\n" if detail else ""))
    sys.stderr.flush()
    return error.exit_code
