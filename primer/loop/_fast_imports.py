"""Import ``jsonschema`` without its slowest optional part.

``jsonschema`` loads ``rfc3987_syntax`` (when installed) to check the ``"iri"`` string
format; that module builds a parser at import and takes seconds of CPU. JupyterLab's
dependencies install it, so every kernel and every ``python -m primer`` would pay for it.
The course never validates ``format: iri``, so when ``jsonschema`` is not imported yet we
import it with ``rfc3987_syntax`` hidden for that one import; the module stays importable
for anyone else afterwards. In this process ``jsonschema``'s format checker then lacks the
``iri`` formats (format checking is off by default in ``jsonschema`` validation).
"""

from __future__ import annotations

import sys
from types import ModuleType


def import_jsonschema() -> ModuleType:
    """``import jsonschema``, skipping ``rfc3987_syntax`` if neither is imported yet."""
    if "jsonschema" in sys.modules or "rfc3987_syntax" in sys.modules:
        import jsonschema
        return jsonschema
    sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]  # makes its import fail
    try:
        import jsonschema
    finally:
        del sys.modules["rfc3987_syntax"]
    return jsonschema
