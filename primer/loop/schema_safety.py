"""An ``input_schema`` from outside is data we check, never code we obey.

A tool's schema may come from a server we do not control (MCP) or from a file. Checking a
call against it must never reach the network or the disk, recurse without end, or freeze the
process on a regular expression (Python's ``re`` backtracks: ``^(a+)+$`` against 34 characters
holds the interpreter, and its GIL, for minutes, so no timeout can fire). So:

* :func:`schema_refusal` says why a schema cannot be checked safely, or ``None``: it must be a
  JSON object of at most :data:`MAX_SCHEMA_DEPTH` levels and :data:`MAX_SCHEMA_VALUES`
  values in a known dialect (draft 4 to 2020-12); every ``$ref`` a JSON pointer into the
  document itself (``#/$defs/x``), never a URL or a file; no ``$ref`` cycle that never
  steps into the input (``{"$ref": "#"}``), and no more than :data:`MAX_EXPANSION`
  subschemas applied in place to one value; every ``pattern`` (and ``patternProperties``
  key) one that RE2 compiles: RE2 matches in time linear in the input, without backtracking,
  and refuses what would need it (look-arounds, back-references).
* :func:`safe_validator_class` is a ``jsonschema`` validator class whose ``pattern``,
  ``patternProperties`` and ``additionalProperties`` match with RE2, and whose instances
  resolve references in a registry that refuses to retrieve anything; :func:`checked_errors`
  runs it with a cap on the work per call (:data:`MAX_KEYWORD_STEPS`).

Dependencies: ``jsonschema``, ``referencing`` and ``google-re2`` (module ``re2``).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, cast
from urllib.parse import unquote

#: The deepest a schema may nest (objects and arrays), as for a model's tool input.
MAX_SCHEMA_DEPTH = 64
#: The most JSON values (objects, arrays, strings, numbers ...) one schema may hold.
MAX_SCHEMA_VALUES = 20_000
#: The longest ``pattern`` accepted, in characters.
MAX_PATTERN_CHARS = 1_000
#: RE2's memory budget for one compiled pattern, in bytes (a bigger program is refused).
PATTERN_MEMORY_BYTES = 1 << 20
#: The most subschemas that may apply in place (through ``$ref``, ``allOf``, ``anyOf``,
#: ``oneOf``, ``not``, ``if``/``then``/``else``) to one value: refs that fan out
#: (``anyOf: [$ref b, $ref b]`` down 30 definitions) would otherwise cost 2**30 checks.
MAX_EXPANSION = 10_000
#: The most keyword checks one call's input may cost; past it the call is refused.
MAX_KEYWORD_STEPS = 200_000

#: The dialects a schema may name in ``$schema`` (none named: 2020-12, jsonschema's default).
_DIALECTS = ("Draft4Validator", "Draft6Validator", "Draft7Validator", "Draft201909Validator",
             "Draft202012Validator")
#: Keywords whose value is one schema, a list of schemas, or a map of names to schemas;
#: "in place" ones apply to the same value, the others to a part of it.
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_MAPS = ("dependentSchemas", "dependencies")
_PART_ONE = ("items", "additionalItems", "additionalProperties", "contains", "propertyNames",
             "unevaluatedItems", "unevaluatedProperties", "contentSchema")
_PART_LISTS = ("prefixItems", "items")
_PART_MAPS = ("properties", "patternProperties", "$defs", "definitions")


#: Optional modules ``jsonschema`` imports to check string formats (``date-time``, ``iri``,
#: ``uri-template``, ...). Input validation here never checks formats (``jsonschema``'s own
#: default), so they are kept out while it is imported: ``rfc3987_syntax`` alone builds a
#: parser for seconds at import, and all of them cost a quarter of a second.
_FORMAT_MODULES = ("rfc3987_syntax", "rfc3987", "rfc3339_validator", "rfc3986_validator",
                   "fqdn", "idna", "isoduration", "jsonpointer", "uri_template", "webcolors",
                   "arrow")


@functools.cache
def import_jsonschema() -> ModuleType:
    """``jsonschema``, imported on first use without its format checkers' modules (unless
    something in this process imported it already). Its format checker then lacks the
    formats those modules check; format checking is off in validation anyway."""
    import sys

    if "jsonschema" not in sys.modules:
        hidden = [m for m in _FORMAT_MODULES if m not in sys.modules]
        for m in hidden:
            sys.modules[m] = None  # type: ignore[assignment]  # makes its import fail
        try:
            import jsonschema
        finally:
            for m in hidden:
                del sys.modules[m]
    import jsonschema.validators

    return jsonschema


class SchemaRefused(ValueError):
    """An ``input_schema`` that cannot be checked safely; the message says why and what to
    change. Raised by :class:`~primer.loop.schema.SchemaCheck` (so by ``Tool(...)``)."""


# ---------------------------------------------------------------- patterns

def _re2() -> Any:
    import re2  # type: ignore[import-untyped,import-not-found,unused-ignore]  # google-re2

    return re2


#: What ``\s`` matches in a JSON Schema pattern (ECMA-262's WhiteSpace and LineTerminator),
#: as RE2 class members: RE2's own ``\s`` is ASCII whitespace only.
_ECMA_SPACE = (r"\t\n\x0B\f\r \x{00A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}"
               r"\x{202F}\x{205F}\x{3000}\x{FEFF}")
#: What ``.`` matches in ECMA-262: anything but a line terminator.
_ECMA_DOT = r"[^\n\r\x{2028}\x{2029}]"


def ecma_to_re2(pattern: str) -> str:
    """``pattern`` (ECMA-262 syntax, as JSON Schema's ``pattern`` is) with ``\\s``, ``\\S``
    and ``.`` spelled as RE2 classes that match what they match in ECMA-262. RE2 reads the
    rest alike. :class:`SchemaRefused` for ``\\S`` inside a class (RE2 cannot nest it)."""
    out, in_class, i = [], False, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt == "s":
                out.append(_ECMA_SPACE if in_class else f"[{_ECMA_SPACE}]")
            elif nxt == "S" and not in_class:
                out.append(f"[^{_ECMA_SPACE}]")
            elif nxt == "S":
                raise SchemaRefused(f"pattern {_shown(pattern)} uses \\S inside a character "
                                    f"class; write the class without it")
            else:
                out.append(c + nxt)
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
        elif c == "]" and in_class:
            in_class = False
        elif c == "." and not in_class:
            c = _ECMA_DOT
        out.append(c)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (cached); :class:`SchemaRefused` when it is too long, too
    big, or needs a feature only a backtracking engine has."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise SchemaRefused(f"pattern {_shown(pattern)} is longer than {MAX_PATTERN_CHARS} "
                            f"characters")
    re2 = _re2()
    options = re2.Options()
    options.log_errors = False  # (RE2 would write each refusal to the process's stderr)
    options.max_mem = PATTERN_MEMORY_BYTES
    try:
        return re2.compile(ecma_to_re2(pattern), options)
    except re2.error as e:
        why = e.args[0].decode("utf-8", "replace") if e.args and isinstance(
            e.args[0], bytes) else str(e)
        raise SchemaRefused(
            f"pattern {_shown(pattern)} cannot be run by a linear-time regex engine (RE2: "
            f"{why}); look-arounds and back-references are not supported, so write the "
            f"pattern without them or drop it and check the value in the tool") from None


def pattern_matches(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``text`` (JSON Schema's unanchored search),
    run by RE2 in time linear in ``len(text)``."""
    return compile_pattern(pattern).search(text) is not None


# ---------------------------------------------------------------- the static check

def schema_refusal(schema: Any) -> str | None:
    """Why ``schema`` cannot be checked safely (see the module's rules), or ``None``.

    Reads the schema only: nothing is fetched, nothing compiled but its patterns. The reason
    is the end of a sentence: "input_schema <reason>".
    """
    try:
        _check(schema)
    except SchemaRefused as e:
        return str(e)
    return None


def _check(schema: Any) -> None:
    if type(schema) is not dict:
        raise SchemaRefused(f"must be a JSON object, not {type(schema).__name__}")
    _check_size(schema)
    cls = _dialect(schema)
    nodes, edges, refs_in_use = _walk(schema, cls)
    _check_cycles(nodes, edges)
    if refs_in_use["unevaluatedProperties"] and refs_in_use["patternProperties"]:
        raise SchemaRefused("uses unevaluatedProperties together with patternProperties, "
                            "which this harness cannot check without a backtracking regex "
                            "engine; use additionalProperties instead")


def _check_size(schema: dict[str, Any]) -> None:
    from .text import json_problem

    problem = json_problem(schema, text=True, max_depth=MAX_SCHEMA_DEPTH)
    if problem:
        raise SchemaRefused(f"is not JSON within the limits: it holds {problem}")
    count, stack = 0, [cast(Any, schema)]
    while stack:
        node = stack.pop()
        count += 1
        if count > MAX_SCHEMA_VALUES:
            raise SchemaRefused(f"holds more than {MAX_SCHEMA_VALUES} values; a tool's "
                                f"input_schema should be far smaller")
        if type(node) is dict:
            stack.extend(node.values())
        elif type(node) is list:
            stack.extend(node)


def _dialect(schema: dict[str, Any]) -> Any:
    validators = import_jsonschema().validators
    if "$schema" in schema and not isinstance(schema["$schema"], str):
        raise SchemaRefused(f"gives $schema as {_shown(schema['$schema'])}; it must be a "
                            f"dialect's URI as a string, or be left out")
    cls = validators.validator_for(schema, default=None if "$schema" in schema else
                                   validators.Draft202012Validator)
    if cls is None:
        raise SchemaRefused(f"names the dialect {_shown(schema.get('$schema'))}, which is "
                            f"not one this harness knows; name draft 4, 6, 7, 2019-09 or "
                            f"2020-12, or leave $schema out")
    if cls.__name__ not in _DIALECTS:
        raise SchemaRefused(f"is written in {cls.__name__[:-9]}; name draft 4, 6, 7, 2019-09 "
                            f"or 2020-12 in $schema")
    return cls


def _walk(root: dict[str, Any], cls: Any
          ) -> tuple[dict[str, Any], dict[str, list[str]], dict[str, bool]]:
    """Every subschema by JSON pointer, the in-place edges between them, and which of two
    keywords occur. Raises :class:`SchemaRefused` for a reference or pattern it refuses."""
    nodes: dict[str, Any] = {}
    edges: dict[str, list[str]] = {}
    used = {"unevaluatedProperties": False, "patternProperties": False}
    todo: list[tuple[str, Any]] = [("", root)]
    while todo:
        where, node = todo.pop()
        if where in nodes:
            continue
        nodes[where] = node
        if type(node) is not dict:
            continue  # true, false (or not a schema: check_schema says so)
        out = edges.setdefault(where, [])
        for key, value in node.items():
            if key in _IN_PLACE_ONE or (key in _PART_ONE and type(value) is not list):
                subs = [(key, value)]
            elif key in _IN_PLACE_LISTS + _PART_LISTS and type(value) is list:
                subs = [(f"{key}/{i}", item) for i, item in enumerate(value)]
            elif key in _IN_PLACE_MAPS + _PART_MAPS and type(value) is dict:
                subs = [(f"{key}/{_escape(name)}", item) for name, item in value.items()
                        if type(item) in (dict, bool)]  # (dependencies may map to names)
            else:
                continue
            in_place = key in _IN_PLACE_ONE + _IN_PLACE_LISTS + _IN_PLACE_MAPS
            for path, item in subs:
                todo.append((f"{where}/{path}", item))
                if in_place:
                    out.append(f"{where}/{path}")
        for key in ("$dynamicRef", "$recursiveRef"):
            if key in node:
                raise SchemaRefused(f"uses {key} at '{where or '#'}'; only $ref within the "
                                    f"document is supported in a tool's input_schema")
        if where and (type(node.get("$id")) is str
                      or (cls.__name__ == "Draft4Validator" and type(node.get("id")) is str)):
            raise SchemaRefused(f"sets $id at '{where}', which moves the base of references "
                                f"inside it; keep $id at the top of the schema only")
        if "$ref" in node:
            target = _ref_target(root, node["$ref"], where)
            todo.append((target[0], target[1]))
            out.append(target[0])
        if type(node.get("pattern")) is str:
            compile_pattern(node["pattern"])
        if type(node.get("patternProperties")) is dict:
            used["patternProperties"] = True
            for pattern in node["patternProperties"]:
                compile_pattern(pattern)
        if "unevaluatedProperties" in node:
            used["unevaluatedProperties"] = True
    return nodes, edges, used


def _ref_target(root: dict[str, Any], ref: Any, where: str) -> tuple[str, Any]:
    at = f"at '{where or '#'}'"
    if type(ref) is not str or not ref.startswith("#"):
        raise SchemaRefused(
            f"has $ref {_shown(ref)} {at}, which points outside the schema; references are "
            f"resolved within the document only (nothing is fetched): write the referenced "
            f"schema under $defs and refer to it as '#/$defs/NAME'")
    fragment = unquote(ref[1:])
    if fragment and not fragment.startswith("/"):
        raise SchemaRefused(f"has $ref {_shown(ref)} {at}, an anchor; only JSON-pointer "
                            f"references ('#/$defs/NAME') are supported")
    node: Any = root
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in fragment.split("/")[1:]]
    for token in tokens:
        if type(node) is dict and token in node:
            node = node[token]
        elif type(node) is list and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise SchemaRefused(f"has $ref {_shown(ref)} {at}, which points to nothing in "
                                f"the schema")
    if type(node) not in (dict, bool):
        raise SchemaRefused(f"has $ref {_shown(ref)} {at}, which points to a value that is "
                            f"not a schema")
    return "/".join(["", *map(_escape, tokens)]) if tokens else "", node


def _check_cycles(nodes: dict[str, Any], edges: dict[str, list[str]]) -> None:
    """Refuse a cycle of in-place edges, and a node whose in-place expansion is too big."""
    size: dict[str, int] = {}
    on_path: list[str] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(start: str) -> None:
        stack: list[tuple[str, Iterator[str]]] = [(start, iter(edges.get(start, ())))]
        state[start] = 1
        on_path.append(start)
        while stack:
            where, children = stack[-1]
            for child in children:
                if state.get(child) == 1:
                    loop = on_path[on_path.index(child):] + [child]
                    raise SchemaRefused(
                        f"has a circular reference that never steps into the input "
                        f"({' -> '.join('#' + p for p in loop)}), so checking a value "
                        f"against it would never end; make each cycle pass through "
                        f"properties or items")
                if child not in state:
                    state[child] = 1
                    on_path.append(child)
                    stack.append((child, iter(edges.get(child, ()))))
                    break
            else:
                stack.pop()
                on_path.pop()
                state[where] = 2
                size[where] = 1 + sum(size[c] for c in edges.get(where, ()))
                if size[where] > MAX_EXPANSION:
                    raise SchemaRefused(
                        f"applies more than {MAX_EXPANSION} subschemas to one value at "
                        f"'#{where}' (references and allOf/anyOf/oneOf that fan out); "
                        f"flatten it")

    for where in nodes:
        if where not in state:
            visit(where)


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _shown(value: Any, limit: int = 80) -> str:
    from .text import safe_repr

    return safe_repr(value, limit)


# ---------------------------------------------------------------- the validator

class _Steps(threading.local):
    left: int | None = None  # None: not inside checked_errors, so not counted


_steps = _Steps()


class TooCostly(Exception):
    """Checking one input took more than :data:`MAX_KEYWORD_STEPS` keyword checks (the
    limit is the exception's argument)."""


def _charge(steps: int) -> None:
    """Count ``steps`` against the call's budget; :class:`TooCostly` when it runs out."""
    left = _steps.left
    if left is not None:
        if left < steps:
            raise TooCostly
        _steps.left = left - steps


def _counted(keyword: Callable[..., Any]) -> Callable[..., Any]:
    def check(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        _charge(1)
        return keyword(validator, value, instance, schema)

    return check


def _unique_items(original: Callable[..., Any]) -> Callable[..., Any]:
    """jsonschema's ``uniqueItems``, charged as the pairwise comparison it may make (one step
    a pair), so a long array of objects cannot cost seconds for one step."""
    def check(validator: Any, unique: Any, instance: Any, schema: Any) -> Any:
        if unique and validator.is_type(instance, "array"):
            _charge(len(instance) * (len(instance) - 1) // 2)
        return original(validator, unique, instance, schema)

    return check


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not pattern_matches(pattern, instance):
        from jsonschema.exceptions import ValidationError

        yield ValidationError(f"{_shown(instance)} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any
                        ) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    _charge(len(patterns) * len(instance))  # every pattern against every key
    for pattern, subschema in patterns.items():
        for k, v in instance.items():
            if pattern_matches(pattern, k):
                yield from validator.descend(v, subschema, path=k, schema_path=pattern)


def _additional_properties(original: Callable[..., Any]) -> Callable[..., Any]:
    """jsonschema's ``additionalProperties``, with ``patternProperties`` matched by RE2."""

    def check(validator: Any, extra: Any, instance: Any, schema: Any) -> Iterator[Any]:
        patterns = schema.get("patternProperties")
        if not patterns or not validator.is_type(instance, "object"):
            yield from original(validator, extra, instance, schema)
            return
        from jsonschema.exceptions import ValidationError

        known = schema.get("properties", {})
        extras = [k for k in instance if k not in known
                  and not any(pattern_matches(p, k) for p in patterns)]
        if validator.is_type(extra, "object"):
            for k in extras:
                yield from validator.descend(instance[k], extra, path=k)
        elif not extra and extras:
            verb = "does" if len(extras) == 1 else "do"
            yield ValidationError(f"{', '.join(map(repr, sorted(extras)))} {verb} not match "
                                  f"any of the regexes: {', '.join(map(repr, sorted(patterns)))}")

    return check


@functools.cache
def safe_validator_class(cls: Any) -> Any:
    """``cls`` (a jsonschema validator class) with its patterns run by RE2 and every keyword
    counted against :data:`MAX_KEYWORD_STEPS` (see :func:`checked_errors`)."""
    keywords = dict(cls.VALIDATORS)
    keywords["pattern"] = _pattern
    keywords["patternProperties"] = _pattern_properties
    if "uniqueItems" in keywords:
        keywords["uniqueItems"] = _unique_items(keywords["uniqueItems"])
    keywords["additionalProperties"] = _additional_properties(keywords["additionalProperties"])
    return import_jsonschema().validators.extend(
        cls, {k: _counted(v) for k, v in keywords.items()})


@functools.cache
def offline_registry() -> Any:
    """A ``referencing`` registry that refuses to retrieve any URI: a reference is resolved
    within the schema (and the dialects' own meta-schemas), or not at all."""
    import referencing
    import referencing.exceptions

    def refuse(uri: str) -> Any:
        raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]

    return referencing.Registry(retrieve=refuse)  # type: ignore[call-arg]


def checked_errors(validator: Any, instance: Any) -> list[Any]:
    """Every ``ValidationError`` of ``instance``, sorted by path; raises :class:`TooCostly`
    past :data:`MAX_KEYWORD_STEPS` keyword checks."""
    limit = _steps.left = MAX_KEYWORD_STEPS
    try:
        return sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    except TooCostly:
        raise TooCostly(limit) from None
    finally:
        _steps.left = None
