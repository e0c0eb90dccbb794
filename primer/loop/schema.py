"""A tool's ``input_schema``: made from a function's type hints, and checked against a call.

:func:`schema_from_signature` builds the JSON Schema a tool offers the model from the
function's type hints (through ``pydantic``); :func:`parse_docstring` reads the tool's
description and the description of each parameter from its docstring. :class:`SchemaCheck`
checks a call's input against a schema with ``jsonschema``, never coercing (a function typed
``int`` is never handed 2.0), after a compiled yes/no check (``fastjsonschema``) that lets the
common valid call through in a microsecond or two. :func:`object_problem` says why an input
is not even a JSON object.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
from collections.abc import Callable
from typing import Any, Literal, cast, get_type_hints

import fastjsonschema

from .schema_safety import (
    SchemaRefused,
    TooCostly,
    checked_errors,
    import_jsonschema,
    offline_registry,
    safe_validator_class,
    schema_refusal,
)
from .text import MAX_INPUT_DEPTH, JSONRefused, json_problem, parse_json, safe_repr

#: A tool function with a parameter of this name receives the call's idempotency key from
#: the harness; the parameter is not part of the ``input_schema`` the model sees.
IDEMPOTENCY_PARAM = "idempotency_key"


def schema_from_signature(f: Callable[..., Any],
                          arg_docs: dict[str, str] | None = None) -> dict[str, Any]:
    """A JSON Schema object for ``f``'s keyword parameters, built by ``pydantic``: every
    object in it, nested ones included, closed to fields it does not list. Raises
    ``TypeError`` for a parameter without a type hint."""
    import pydantic  # (on first use: a lesson that builds no tool from a function never pays)

    hints = get_type_hints(f)
    fields: dict[str, Any] = {}
    for p in inspect.signature(f).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name == IDEMPOTENCY_PARAM:
            continue
        if p.name not in hints:
            raise TypeError(f"{f.__name__}: parameter {p.name!r} needs a type hint to become "
                            f"part of the tool's input_schema")
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (hints[p.name], pydantic.Field(
            default, description=(arg_docs or {}).get(p.name)))
    model = pydantic.create_model(f"{f.__name__}_input", **fields)
    schema = model.model_json_schema()
    _tidy(schema)
    schema["additionalProperties"] = False
    return cast(dict[str, Any], schema)


#: Where a JSON Schema holds further schemas: maps of them, lists of them, and single ones.
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")
_SCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")
_SCHEMA_ONE = ("items", "additionalProperties", "not", "contains")


def _tidy(node: Any) -> None:
    """In place, in ``node`` and every schema inside it: drop pydantic's ``title``s (the
    model reads the names and descriptions), and close each object that lists its
    ``properties`` (``additionalProperties: false``, unless the schema says otherwise), so a
    misspelt field of a nested object is an error too rather than passed on unnoticed."""
    if not isinstance(node, dict):
        return
    node.pop("title", None)
    if node.get("type") == "object" and "properties" in node:
        node.setdefault("additionalProperties", False)
    for key in _SCHEMA_MAPS:
        for sub in (node.get(key) or {}).values():
            _tidy(sub)
    for key in _SCHEMA_LISTS:
        for sub in node.get(key) or ():
            _tidy(sub)
    for key in _SCHEMA_ONE:
        _tidy(node.get(key))


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """A docstring's summary (its text before ``Args:``, on one line) and the description of
    each parameter listed under ``Args:`` (``name: text`` lines, continued on indented lines)."""
    head, _, args = doc.partition("\nArgs:\n")
    arg_docs: dict[str, str] = {}
    current = None
    for line in args.splitlines():
        m = re.match(r"\s{2,}(\w+)(?:\s*\([^)]*\))?:\s*(.*)", line)
        if m:
            current = m.group(1)
            arg_docs[current] = m.group(2).strip()
        elif current and line.strip():
            arg_docs[current] += " " + line.strip()
        elif not line.startswith(" ") and line.strip():
            break
    return " ".join(head.split()), arg_docs


#: Schemas up to this size (characters of JSON) have their meta-schema check remembered.
CACHED_SCHEMA_CHARS = 65_536


def _check_schema(cls: Any, schema: dict[str, Any]) -> None:
    """``cls.check_schema(schema)`` (raises ``jsonschema.SchemaError``), remembered per
    distinct schema up to :data:`CACHED_SCHEMA_CHARS`: the meta-schema check costs
    milliseconds, and the same tools are built again and again (a scenario per run, a world
    per trial). A schema that JSON would change (a tuple for a list) is checked as it is."""
    try:
        text = json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        text = None
    if text is None or len(text) > CACHED_SCHEMA_CHARS or json.loads(text) != schema:
        cls.check_schema(schema)
    else:
        _check_schema_text(cls, text)


@functools.lru_cache(maxsize=1024)
def _check_schema_text(cls: Any, text: str) -> None:
    cls.check_schema(json.loads(text))  # a failure is not remembered: it raises each time


class SchemaCheck:
    """A call's input checked against one ``input_schema``.

    ``SchemaCheck(schema)`` raises :class:`~primer.loop.schema_safety.SchemaRefused` (a
    ``ValueError``) when ``schema`` cannot be checked safely (a ``$ref`` outside the
    document, a cycle, a pattern only a backtracking engine can run: see
    :mod:`primer.loop.schema_safety`) and ``jsonschema.SchemaError`` when it is not a valid
    JSON Schema. :meth:`problems` is ``None`` for valid input, else one message per error.
    "integer" means a JSON integer only: JSON Schema counts 2.0 as an integer, but a function
    typed ``int`` must not be handed a float.
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        why = schema_refusal(schema)
        if why:
            raise SchemaRefused(f"input_schema {why}")
        cls = import_jsonschema().validators.validator_for(schema)
        _check_schema(cls, schema)
        self.schema = schema
        self.validator = safe_validator_class(_strict_validator(cls))(
            schema, registry=offline_registry())
        self._fast: Callable[[Any], bool] | Literal[False] | None = None

    def problems(self, args: dict[str, Any]) -> list[str] | None:
        """``None`` when ``args`` is valid, else each error as ``"at 'path': message"``
        (the message alone for the top level), in the order of their paths."""
        fast = self._fast
        if fast is None:  # compiled on first use, once per distinct schema
            fast = self._fast = _fast_check(json.dumps(self.schema, sort_keys=True))
        if fast is not False and fast(args):
            return None  # valid: the fast check accepts only what jsonschema accepts
        try:
            errors = checked_errors(self.validator, args)
        except TooCostly as e:
            return [f"the input costs more than {e.args[0]} checks against "
                    f"input_schema; send a smaller input"]
        except Exception as e:  # noqa: BLE001 - never raise for an input (RecursionError too)
            return [f"the input could not be checked against input_schema "
                    f"({type(e).__name__}); send a simpler input"]
        if not errors:
            return None
        return [f"at '{'/'.join(map(str, e.absolute_path))}': {e.message}"
                if e.absolute_path else e.message for e in errors]


    def coerce(self, args: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """Lax mode: ``args`` with each value of the wrong JSON type converted as pydantic's
        lax mode converts it (``"98.7"`` to the number 98.7, ``"7"`` and ``7.0`` to the
        integer 7, ``"yes"`` to ``true``; never a number to a string), and a record of each
        change, ``{"path", "from", "to", "type"}``. ``None`` when conversion cannot make the
        input valid. ``args`` itself is not changed; valid input comes back as it is."""
        value: Any = json.loads(json.dumps(args))  # a copy (the input is plain JSON)
        changes: list[dict[str, Any]] = []
        done: list[list[Any]] = []
        for _ in range(MAX_COERCIONS + 1):
            try:
                errors = checked_errors(self.validator, value)
            except Exception:  # noqa: BLE001 - too costly, or not checkable: no lax pass
                return None
            if not errors:
                return value, changes
            changed = False
            for e in errors:
                path = list(e.absolute_path)
                if len(changes) >= MAX_COERCIONS or path in done:
                    continue
                for kind in _wanted_types(e):
                    new = _lax_value(e.instance, kind)
                    if new is not _NO:
                        value = _replaced(value, path, new)
                        done.append(path)
                        changes.append({"path": "/".join(map(str, path)), "from": e.instance,
                                        "to": new, "type": kind})
                        changed = True
                        break
            if not changed:
                return None
        return None


#: The most values one call's input may have converted in lax mode.
MAX_COERCIONS = 100
_NO = object()
_LAX_TYPES = ("integer", "number", "boolean")


def _wanted_types(error: Any) -> list[str]:
    """The JSON types a value failed to be (a ``type`` error, or one inside ``anyOf`` /
    ``oneOf`` at the same place), those lax mode converts to, in the schema's order."""
    found: list[Any] = []
    if error.validator == "type":
        found.append(error.validator_value)
    elif error.validator in ("anyOf", "oneOf"):
        found += [sub.validator_value for sub in error.context or ()
                  if sub.validator == "type" and not sub.relative_path]
    kinds = [k for v in found for k in (v if isinstance(v, list) else [v])]
    return [k for k in kinds if k in _LAX_TYPES]


@functools.cache
def _lax_adapter(kind: str) -> Any:
    import pydantic

    target = {"integer": int, "number": float, "boolean": bool}[kind]
    return pydantic.TypeAdapter(target, config=pydantic.ConfigDict(allow_inf_nan=False))


def _lax_value(value: Any, kind: str) -> Any:
    """``value`` as pydantic's lax mode converts it to ``kind``, or ``_NO``."""
    import pydantic

    if type(value) not in (str, int, float, bool):
        return _NO
    try:
        return _lax_adapter(kind).validate_python(value, strict=False)
    except pydantic.ValidationError:
        return _NO


def _replaced(root: Any, path: list[Any], new: Any) -> Any:
    if not path:
        return new
    node = root
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = new
    return root


def _is_integer(_checker: Any, value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: Keywords that mean the same in draft 4 and in later drafts, and that fastjsonschema checks
#: exactly as jsonschema does. A schema using any other keyword gets no fast path; nor does
#: ``pattern``, which fastjsonschema runs with Python's backtracking ``re``.
_FAST_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "items",
                            "minimum", "maximum", "minLength", "maxLength",
                            "minItems", "maxItems", "anyOf", "allOf", "not", "enum",
                            "description", "title", "default", "examples", "format"})


def _fast_safe(node: Any) -> bool:
    if not isinstance(node, dict) or not set(node) <= _FAST_KEYWORDS:
        return False
    if "enum" in node and not all(isinstance(v, str) for v in node["enum"]):
        return False  # Python's True == 1 would let a boolean through an enum of numbers
    subs = list(node.get("properties", {}).values()) + node.get("anyOf", []) + node.get(
        "allOf", []) + [node[k] for k in ("items", "not") if k in node]
    extra = node.get("additionalProperties", False)
    return (all(_fast_safe(sub) for sub in subs)
            and (isinstance(extra, bool) or _fast_safe(extra)))


@functools.lru_cache(maxsize=256)
def _fast_check(schema_json: str) -> Callable[[Any], bool] | Literal[False]:
    """A compiled yes/no check for the schema, or ``False`` when there is none.

    Validating with jsonschema costs tens of µs a call, most of the harness's own work per
    step; ``fastjsonschema`` compiles a schema to a Python function that checks it in about
    1–2 µs. It is used only to say "valid", and only for schemas made of
    :data:`_FAST_KEYWORDS` under draft 4 rules (where "integer" excludes 2.0, as the strict
    validator here does); formats are ignored by both. Any input it rejects goes to jsonschema,
    which writes the error messages and has the last word.
    """
    schema = json.loads(schema_json)
    if not _fast_safe(schema):
        return False
    try:
        compiled = fastjsonschema.compile(
            {**schema, "$schema": "http://json-schema.org/draft-04/schema#"},
            use_default=False, use_formats=False, detailed_exceptions=False)
    except Exception:  # noqa: BLE001 - a schema it cannot compile gets no fast path
        return False

    def check(args: Any) -> bool:
        try:
            compiled(args)
        except fastjsonschema.JsonSchemaValueException:
            return False
        return True

    return check


@functools.cache
def _strict_validator(cls: Any) -> Any:
    """``cls`` with "integer" meaning a JSON integer only: JSON Schema counts 2.0 as an
    integer, but a function typed ``int`` must not be handed a float."""
    return import_jsonschema().validators.extend(
        cls, type_checker=cls.TYPE_CHECKER.redefine("integer", _is_integer))


def object_problem(args: Any) -> str:
    """Why ``args`` is not a usable tool input (a JSON object within the limits of
    :mod:`primer.loop.text`), as the end of a sentence: "the input ...". For text,
    the JSON parser's own message and position."""
    if isinstance(args, str):
        try:
            value = parse_json(args)
        except JSONRefused as e:
            return (f"arrived as text, not a JSON object, and the text is not usable JSON: "
                    f"{e.reason} (it began {safe_repr(args, 80)})")
        if isinstance(value, dict):
            return "arrived as text holding a JSON object, not as the object itself"
        return f"arrived as text holding {json_type(value)}, not a JSON object"
    if type(args) is not dict:
        return f"must be a JSON object, not {json_type(args)}"
    problem = json_problem(args, text=True, max_depth=MAX_INPUT_DEPTH)
    return f"cannot be used: it holds {problem}" if problem else "is a usable JSON object"


def json_type(value: Any) -> str:
    """What kind of JSON value ``value`` is, for messages: "an array", "null", ..."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list | tuple):
        return "an array"
    if value is None:
        return "null"
    if isinstance(value, str):
        return "a string"
    return f"a {type(value).__name__}"
