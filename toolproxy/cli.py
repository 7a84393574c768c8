"""The `toolproxy` command (also `python -m toolproxy`): `serve` runs the gunicorn gevent server of `make run`,
`check-config` validates a configuration and shows what it resolves to, secrets masked, and `doctor` asks an
upstream whether tool calling works with a model.

Settings come from command-line flags over `TOOLPROXY_*` variables over the YAML file: the flags are written
into the environment the settings are read from, so one loader validates all three the same way.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from toolproxy.config.datadir import data_dir_problem
from toolproxy.config.report import masked, warnings_for
from toolproxy.config.settings import ConfigError, Settings, load_settings
from toolproxy.version import version

# serve's flags and the variable each one sets.
_FLAG_VARIABLES = {"upstream": "TOOLPROXY_UPSTREAM", "workers": "TOOLPROXY_WORKERS", "config": "TOOLPROXY_CONFIG",
                   "data_dir": "TOOLPROXY_DATA_DIR", "log_format": "TOOLPROXY_LOG_FORMAT",
                   "api_key": "TOOLPROXY_API_KEYS"}


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command is None:
        parser().print_help()
        return 2
    result: int = args.run(args)
    return result


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="toolproxy", description="An OpenAI-compatible proxy that makes tool "
                                     "calling with local models work. Settings: flags over TOOLPROXY_* variables "
                                     "over the YAML file (see docs/configuration.md).")
    root.add_argument("--version", action="version", version=f"toolproxy {version()}")
    commands = root.add_subparsers(dest="command", title="commands")
    serve = commands.add_parser("serve", help="run the proxy (gunicorn with gevent workers)")
    serve.add_argument("--upstream", metavar="URL", help="base URL of the OpenAI-compatible server, with /v1")
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (default 8003)")
    serve.add_argument("--workers", type=int, metavar="N", help="gunicorn worker processes (default 1)")
    serve.add_argument("--config", metavar="FILE", help="YAML configuration file")
    serve.add_argument("--api-key", metavar="KEY", action="append",
                       help="a key clients must send (repeat for several; other users of this machine can read a "
                            "command line: TOOLPROXY_API_KEYS in a file of mode 0600 keeps it private)")
    serve.add_argument("--data-dir", metavar="DIR",
                       help="the transform log and metrics (default $XDG_STATE_HOME/toolproxy or "
                            "~/.local/state/toolproxy); one instance per directory")
    serve.add_argument("--log-format", choices=("text", "json"), help="log lines as text (default) or JSON")
    serve.set_defaults(run=_serve)
    check = commands.add_parser("check-config", help="validate a configuration and print the resolved settings")
    check.add_argument("file", nargs="?", help="YAML file (default: TOOLPROXY_CONFIG, if set)")
    check.set_defaults(run=_check_config)
    doctor = commands.add_parser("doctor", help="will tool calling work with this model, and how to configure it?")
    doctor.add_argument("--upstream", metavar="URL", required=True, help="the server's base URL, with /v1")
    doctor.add_argument("--model", metavar="NAME", required=True, help="the model name the server serves")
    doctor.add_argument("--api-key", metavar="KEY", help="the server's key, if it wants one")
    doctor.add_argument("--json", action="store_true", help="print the findings as JSON")
    doctor.add_argument("--timeout", type=float, default=120.0, metavar="S", help="longest wait per answer (120)")
    doctor.add_argument("--tries", type=int, default=3, metavar="N", help="tries per prompt-mode dialect (3)")
    doctor.set_defaults(run=_doctor)
    return root


def environ_for(args: argparse.Namespace, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment with serve's flags written over it: flags win over variables, which win over YAML."""
    result = dict(environ)
    for flag, variable in _FLAG_VARIABLES.items():
        value = getattr(args, flag, None)
        if value is not None:  # --api-key, given several times, is a list
            result[variable] = ",".join(value) if isinstance(value, list) else str(value)
    if args.host is not None or args.port is not None:
        host, _, port = _current_bind(result).rpartition(":")
        if args.host is not None:  # an IPv6 address takes brackets before its port
            host = f"[{args.host}]" if ":" in args.host and not args.host.startswith("[") else args.host
        result["TOOLPROXY_BIND"] = f"{host}:{args.port or port}"
    return result


def _current_bind(environ: Mapping[str, str]) -> str:
    """The bind the variables and the YAML file give; a unix socket gives way to the default host and port."""
    try:
        bind = load_settings(environ).bind
    except ConfigError:
        bind = Settings().bind  # the full load that follows reports the problems
    return Settings().bind if bind.startswith("unix:") else bind


def _serve(args: argparse.Namespace) -> int:
    from toolproxy.server import Server, settings_or_exit  # what the master may import: no Flask, no requests

    environ = environ_for(args, os.environ)
    settings_or_exit(environ)  # every problem listed before gunicorn starts
    os.environ.update(environ)  # the server reads them, and a reload (HUP) reads the same again
    Server().run()
    return 0


def _check_config(args: argparse.Namespace) -> int:
    environ = dict(os.environ)
    if args.file:
        environ["TOOLPROXY_CONFIG"] = args.file
    try:
        settings = load_settings(environ)
        wrong, unreachable = _log_url_check(settings)
        problems = [problem for problem in (data_dir_problem(settings.data_dir), wrong) if problem]
        if problems:
            raise ConfigError(problems)
    except ConfigError as error:
        print(f"toolproxy: the configuration has problems:\n{error}", file=sys.stderr)
        return 1
    for warning in [*warnings_for(settings), *filter(None, [unreachable])]:
        print(f"warning: {warning}", file=sys.stderr)
    _print_settings(masked(settings))
    return 0


def _log_url_check(settings: Settings) -> tuple[str | None, str | None]:
    """(wrong, unreachable): the transform log's database URL cannot work, or the database does not answer now
    (nothing is created in it here)."""
    if not settings.log_url:
        return None, None
    from toolproxy.observe.postgres_schema import check

    return check(settings.log_url, create=False)


def _print_settings(values: dict[str, Any]) -> None:
    width = max(map(len, values))
    for name, value in values.items():
        print(f"{name:<{width}}  {value}")


def _doctor(args: argparse.Namespace) -> int:
    from toolproxy.doctor.report import render_json, render_text  # only this command needs requests
    from toolproxy.doctor.run import Doctor, DoctorError

    def progress(line: str) -> None:
        print(f"toolproxy doctor: {line} ...", file=sys.stderr, flush=True)

    doctor = Doctor(args.upstream, args.model, args.api_key, timeout=args.timeout, tries=max(1, args.tries),
                    progress=progress)
    try:
        findings = doctor.run()
    except DoctorError as error:
        print(f"toolproxy doctor: {error}", file=sys.stderr)
        return 2
    print(render_json(findings) if args.json else render_text(findings), end="")
    return 0
