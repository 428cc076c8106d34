"""vllm_check.py - berth's engine check for vLLM, run before anything goes dark.

berth runs it with the interpreter of the unit's `vllm` (the first line of that script), the
unit's environment, and the unit's own arguments after the executable:

  <python of the unit's vllm> vllm_check.py serve MODEL [vLLM flags ...]

It does what `vllm serve` does before it creates the engine, and no more: no weights are loaded,
no GPU memory is taken, nothing listens. Followed at vLLM commit
005223338608bc94fd165a4f976c102a57bd1fc4 (vllm/entrypoints/openai/cli_args.py) and
00a5fdd20935ba7679750db22997dcf539ca4591 (vllm/entrypoints/cli/main.py, serve.py); berth's
catalogue (planners/servers/catalogue/vllm.json) names commit
99d7eb5d6a512cfcc5a2b104f24ebf2d6cda772b, whose release keeps FlexibleArgumentParser in
vllm/utils (the import below tries both places). The steps:

  1. the parser of `vllm serve`: a FlexibleArgumentParser (vllm/utils/argparse_utils.py) with a
     `serve` subcommand whose arguments make_arg_parser adds (cli/main.py _build_parser,
     cli/serve.py ServeSubcommand.subparser_init, openai/cli_args.py make_arg_parser); an
     unknown flag or a bad value is refused here, as `vllm serve` refuses it;
  2. validate_parsed_serve_args (openai/cli_args.py), ServeSubcommand.validate;
  3. args.model = args.model_tag (ServeSubcommand.cmd);
  4. validate_api_server_args (vllm/entrypoints/openai/api_server.py): the tool-call and
     reasoning parsers, as setup_server checks them before the engine starts (after importing
     --tool-parser-plugin);
  5. EngineArgs.from_cli_args(args).create_engine_config(usage_context=OPENAI_API_SERVER)
     (vllm/engine/arg_utils.py): the model's config.json, its architecture, the parallel,
     cache and speculative configs ("Unsupported speculative method: 'mtp'").

Its last line says the verdict, and its exit status with it:
  berth-engine-check: ok                        exit 0
  berth-engine-check: refused: TYPE: MESSAGE    exit 1 (vLLM's own exception, on one line)
  berth-engine-check: error: MESSAGE            exit 2 (vLLM could not be imported or asked)
"""

import contextlib
import io
import sys

sys.dont_write_bytecode = True  # nothing written into the engine's virtualenv

PREFIX = "berth-engine-check: "
MAX_MESSAGE = 1500


def one_line(text):
    """The exception's text on one line, bounded: berth quotes it in its error."""
    parts = [p.strip() for p in str(text).splitlines() if p.strip()]
    line = " / ".join(parts)
    return line if len(line) <= MAX_MESSAGE else line[:MAX_MESSAGE] + " ..."


def verdict(kind, message, status):
    sys.stdout.flush()
    sys.stderr.flush()
    print(PREFIX + kind + (": " + message if message else ""), flush=True)
    return status


def refused(e):
    return verdict("refused", one_line("%s: %s" % (type(e).__name__, e)), 1)


def import_vllm():
    """The vLLM functions `vllm serve` uses, from the interpreter's own vLLM."""
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # releases before vllm/utils was split (v0.10 and older)
        from vllm.utils import FlexibleArgumentParser
    from vllm.engine.arg_utils import EngineArgs
    from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
    try:
        from vllm.entrypoints.openai.api_server import validate_api_server_args
    except ImportError:
        validate_api_server_args = None
    try:
        from vllm.usage.usage_lib import UsageContext
        usage = UsageContext.OPENAI_API_SERVER
    except ImportError:
        usage = None
    return (FlexibleArgumentParser, make_arg_parser, validate_parsed_serve_args,
            validate_api_server_args, EngineArgs, usage)


def parse(FlexibleArgumentParser, make_arg_parser, argv):
    """argv as `vllm serve` parses it; an argparse refusal becomes its own message."""
    parser = FlexibleArgumentParser(prog="vllm", description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    serve = subparsers.add_parser("serve", usage="vllm serve [model_tag] [options]")
    make_arg_parser(serve)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            return parser.parse_args(argv), None
    except SystemExit:
        lines = [l for l in captured.getvalue().splitlines() if l.strip()]
        return None, lines[-1] if lines else "the vllm serve parser refused the arguments"


def main(argv):
    if not argv or argv[0] != "serve":
        return verdict("error", "berth renders `vllm serve MODEL ...`; got %r" % argv[:1], 2)
    try:
        (FlexibleArgumentParser, make_arg_parser, validate_parsed_serve_args,
         validate_api_server_args, EngineArgs, usage) = import_vllm()
    except Exception as e:  # noqa: BLE001 - whatever stops the import stops `vllm serve` too
        return verdict("error", one_line("this interpreter (%s) cannot import vLLM: %s: %s"
                                         % (sys.executable, type(e).__name__, e)), 2)
    try:
        args, argparse_error = parse(FlexibleArgumentParser, make_arg_parser, argv)
        if argparse_error is not None:
            return verdict("refused", one_line("ArgumentError: " + argparse_error), 1)
        validate_parsed_serve_args(args)
        if getattr(args, "model_tag", None) is not None:
            args.model = args.model_tag
        if validate_api_server_args is not None:
            plugin = getattr(args, "tool_parser_plugin", "")
            if plugin and len(plugin) > 3:
                from vllm.tool_parsers import ToolParserManager
                ToolParserManager.import_tool_parser(plugin)
            validate_api_server_args(args)
        engine_args = EngineArgs.from_cli_args(args)
        if usage is not None:
            engine_args.create_engine_config(usage_context=usage)
        else:
            engine_args.create_engine_config()
    except Exception as e:  # noqa: BLE001 - the engine's own refusal, quoted by berth
        return refused(e)
    return verdict("ok", "", 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
