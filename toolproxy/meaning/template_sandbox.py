"""A chat template rendered in a bounded sandbox: Jinja's sandbox (no attribute a template should not reach), the
helpers real templates use (`raise_exception`, `strftime_now`, `tojson` as Hugging Face writes it, `loopcontrols`,
`do`, `{% generation %}`), and limits on everything a template could spend: its size, its steps (Python lines
traced while it renders), the size of each value it builds and of all of them together, and its output.

A template reaches nothing but the variables it is given. No I/O: `strftime_now` answers a fixed date, so a
rendering depends on the template and the conversation alone.
"""

from __future__ import annotations

import datetime
import functools
import json
import re
import sys
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any

from jinja2 import TemplateError as JinjaError
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.ext import Extension, do, loopcontrols
from jinja2.parser import Parser
from jinja2.runtime import Context
from jinja2.sandbox import SandboxedEnvironment

from toolproxy.config.values import MAX_TEMPLATE_CHARS

# Traced Python lines (and calls): the 18 real templates of tests/fixtures/templates render the sample conversation
# in 860 to 5,650, and build at most 20,000 characters.
MAX_STEPS = 500_000
MAX_VALUE = 1_000_000  # characters (or items) of one value the template builds
MAX_BUILT = 8_000_000  # characters (or items) of all the values one rendering builds together
MAX_OUTPUT = 1_000_000
MAX_NUMBER = 100_000  # a number given to a call or filter (a width, a count): `center(10**9)` would allocate 1 GB
_FIXED_NOW = datetime.datetime(2026, 1, 1, 12, 0, 0)
_WIDE_FIELD = re.compile(r"\d{6}")  # a format field of a million characters or more (%999999d, {:>999999})


class TemplateError(ValueError):
    """The template was not rendered; the message says why, in one sentence. `at_limit`: it was stopped at one of
    the limits (another conversation would not fare better)."""

    def __init__(self, message: str, at_limit: bool = False) -> None:
        super().__init__(message)
        self.at_limit = at_limit


class _Exhausted(Exception):
    """Raised inside the rendering when it passes a limit (the trace function raises it where the template is)."""


class _Raised(Exception):
    """The template's own `raise_exception(message)`: it refuses the conversation it was given."""


class _Budget:
    """What one rendering has spent: steps (traced lines) and characters or items of the values it built."""

    def __init__(self) -> None:
        self.steps = 0
        self.built = 0

    def trace(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any]:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise _Exhausted(f"it ran past {MAX_STEPS} steps")
        return self.trace

    def add(self, value: Any) -> Any:
        size = len(value) if isinstance(value, (str, list, tuple, dict)) else 0
        if size > MAX_VALUE:
            raise _Exhausted(f"it built a value of more than {MAX_VALUE} characters")
        self.built += size
        if self.built > MAX_BUILT:
            raise _Exhausted(f"it built more than {MAX_BUILT} characters in all")
        return value


class _BoundedCodeGenerator(CodeGenerator):
    """`a ~ b` goes through the environment's `concat`, where its size is counted (Jinja joins it directly)."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.concat((")
        for argument in node.nodes:
            self.visit(argument, frame)
            self.write(", ")
        self.write("))")


class _Generation(Extension):
    """`{% generation %}...{% endgeneration %}` (Hugging Face marks the assistant's tokens with it): its body as is."""

    tags = {"generation"}

    def parse(self, parser: Parser) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body).set_lineno(lineno)


class _Environment(SandboxedEnvironment):
    """Jinja's sandbox (mutable: templates written for llama.cpp's engine append to lists they made, and what
    they are given is a fresh copy each time), with every size a template controls checked before it is paid."""

    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset({"+", "*", "**", "%"})

    def __init__(self, budget: _Budget) -> None:
        super().__init__(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, do, _Generation])
        self.budget = budget
        self.filters = {name: _bounded(self, filter) for name, filter in self.filters.items()}
        self.filters["tojson"] = _bounded(self, _tojson)
        self.globals.update(raise_exception=_raise, strftime_now=lambda fmt: _FIXED_NOW.strftime(str(fmt)))

    def concat(self, pieces: Any) -> str:  # Jinja's is "".join; block sets and macros use it too
        pieces = [str(piece) for piece in pieces]
        if sum(map(len, pieces)) > MAX_VALUE:
            raise _Exhausted(f"it built a value of more than {MAX_VALUE} characters")
        joined: str = self.budget.add("".join(pieces))
        return joined

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "*" and _is_sequence(left, right):
            sequence, count = (left, right) if isinstance(right, int) else (right, left)
            if count * len(sequence) > MAX_VALUE:
                raise _Exhausted(f"it asked for a value of more than {MAX_VALUE} characters")
        elif operator == "**" and isinstance(right, (int, float)) and abs(right) > 64:
            raise _Exhausted("it raised a number to a power past 64")
        elif operator == "%" and isinstance(left, str) and _WIDE_FIELD.search(left):
            raise _Exhausted("it formatted a field a million characters wide")
        elif operator == "+" and _is_sequence(left, right, both=True) and len(left) + len(right) > MAX_VALUE:
            raise _Exhausted(f"it built a value of more than {MAX_VALUE} characters")
        return self.budget.add(super().call_binop(context, operator, left, right))

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # (named as Jinja names it)
        _check_arguments(args, kwargs)
        if getattr(__obj, "__name__", "") in ("format", "format_map", "replace", "join"):
            _check_string_method(__obj, args)
        result = super().call(__context, __obj, *args, **kwargs)
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, (list, dict)):  # append/extend/update grow a container in place
            __self.budget.add(owner)
        return __self.budget.add(result)


def _is_sequence(left: Any, right: Any, both: bool = False) -> bool:
    kinds = (str, list, tuple)
    if both:
        return isinstance(left, kinds) and isinstance(right, kinds)
    return (isinstance(left, kinds) and isinstance(right, int)) or (isinstance(right, kinds) and isinstance(left, int))


def _check_arguments(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_NUMBER:
            raise _Exhausted(f"it passed {value} to a call or filter (at most {MAX_NUMBER})")


def _check_string_method(method: Any, args: tuple[Any, ...]) -> None:
    """Those string methods whose result can dwarf their inputs, checked before they run."""
    # The sandbox hands templates `str.format` wrapped (its own formatter), the string still at `__wrapped__`.
    owner = getattr(method, "__self__", None) or getattr(getattr(method, "__wrapped__", None), "__self__", None)
    if not isinstance(owner, str):
        return
    name = method.__name__
    if name in ("format", "format_map") and _WIDE_FIELD.search(owner):
        raise _Exhausted("it formatted a field a million characters wide")
    if name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        _check_replace(owner, args[0], args[1])
    if name == "join" and args and isinstance(args[0], (list, tuple)):
        total = sum(len(str(item)) for item in args[0]) + len(owner) * len(args[0])
        if total > MAX_VALUE:
            raise _Exhausted(f"it joined a value of more than {MAX_VALUE} characters")


def _check_replace(text: str, old: str, new: str) -> None:
    count = text.count(old) if old else len(text) + 1
    if len(text) + count * (len(new) - len(old)) > MAX_VALUE:
        raise _Exhausted(f"it replaced its way to a value of more than {MAX_VALUE} characters")


def _bounded(environment: _Environment, filter: Callable[..., Any]) -> Callable[..., Any]:
    """A filter whose numeric arguments are capped and whose result is counted (`replace`, `format` checked
    first, as the string methods are)."""

    @functools.wraps(filter)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _check_arguments(args[1:], kwargs)
        strings = [arg for arg in args if isinstance(arg, str)]
        if filter.__name__ == "do_replace" and len(strings) >= 3:
            _check_replace(*strings[-3:])
        if filter.__name__ == "do_format" and strings and _WIDE_FIELD.search(strings[0]):
            raise _Exhausted("it formatted a field a million characters wide")
        return environment.budget.add(filter(*args, **kwargs))

    return bounded


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    """As Hugging Face's templates expect it: plain JSON, not Jinja's HTML-escaped `tojson` (`<` as \\u003c)."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise(message: Any) -> None:
    raise _Raised(str(message))


class SandboxedTemplate:
    """A template compiled once into the sandbox, rendered as often as asked, each time within the limits."""

    def __init__(self, template: str) -> None:
        if len(template) > MAX_TEMPLATE_CHARS:
            raise TemplateError(f"the template has {len(template)} characters, more than {MAX_TEMPLATE_CHARS}")
        self._environment = _Environment(_Budget())
        try:  # compiled before any step is counted: the compiler's work is bounded by the template's size
            self._compiled = self._environment.from_string(template)
        except JinjaError as error:
            raise TemplateError(f"the template is not valid Jinja: {str(error)[:200]}") from None
        except RecursionError:
            raise TemplateError("the template is nested too deeply to compile") from None

    def render(self, variables: Mapping[str, Any]) -> str:
        """The template rendered with `variables`; TemplateError says what went wrong."""
        budget = self._environment.budget = _Budget()
        previous = sys.gettrace()
        sys.settrace(budget.trace)
        try:
            return self._generate(variables)
        except _Raised as refusal:
            raise TemplateError(f"the template refused the conversation: {refusal}") from None
        except _Exhausted as limit:
            raise TemplateError(f"the template was stopped: {limit}", at_limit=True) from None
        except (JinjaError, ArithmeticError, LookupError, TypeError, ValueError, AttributeError, RecursionError,
                MemoryError) as error:
            raise TemplateError(f"the template failed: {type(error).__name__}: {str(error)[:200]}",
                                at_limit=isinstance(error, (RecursionError, MemoryError))) from None
        finally:
            sys.settrace(previous)

    def _generate(self, variables: Mapping[str, Any]) -> str:
        pieces: list[str] = []
        size = 0
        for piece in self._compiled.generate(**variables):
            size += len(piece)
            if size > MAX_OUTPUT:
                raise _Exhausted(f"its output passed {MAX_OUTPUT} characters")
            pieces.append(piece)
        return "".join(pieces)


def render(template: str, variables: Mapping[str, Any]) -> str:
    """`template` compiled and rendered once with `variables`."""
    return SandboxedTemplate(template).render(variables)
