"""A pytest plugin for the course's own test runs: jsonschema without its format modules.

pyproject.toml's ``addopts`` load it with ``-p``, which pytest does before the plugins it finds
installed. nbval's plugin imports nbformat, which imports jsonschema, whose format checkers
import ``rfc3987_syntax``, which builds a parser for its grammar: about 3 s in every pytest
process (each xdist worker, each nbval worker) for a check no test uses. Importing jsonschema
first through :func:`~primer.loop.schema_safety.import_jsonschema` leaves those modules out,
as the course's own processes do; later imports reuse that jsonschema. Defines no hooks.
"""

from __future__ import annotations

from primer.loop.schema_safety import import_jsonschema

import_jsonschema()
