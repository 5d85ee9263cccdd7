"""A pytest plugin for tests/test_learning_claims.py: at collection, writes every learning test's marker as JSON.

``python -m pytest --collect-only -q -p learning_collect`` (with ``tests`` on the path) writes to
``$MOSAIC_LEARNING_COLLECT`` one object per collected test whose name or marker says it learns.
"""

from __future__ import annotations

import inspect
import json
import os
import re

#: A test's name that says it learns (``learner`` and ``learning_rate`` do not); the same rule as the test's.
LEARNS = re.compile(r"def (test_\w*(?:learns|_learn_|_beats?_|beyond_random)\w*)\(")


def pytest_collection_finish(session):
    found = []
    for item in session.items:
        marker = item.get_closest_marker("learning")
        function = getattr(item, "function", None)
        source = inspect.getsource(function) if function is not None else ""
        if marker is None and "check(request" not in source and not LEARNS.search(f"def {item.originalname}("):
            continue
        claims = {}
        if marker is not None:
            for name, claim in marker.kwargs["claims"].items():
                claims[name] = {"bar": claim.bar, "measured": claim.measured, "problems": claim.problems(),
                                "checked": f'check(request, "{name}"' in source}
        found.append({"test": item.nodeid, "function": item.originalname, "marked": marker is not None,
                      "seed": marker.kwargs["seed"] if marker else None, "claims": claims,
                      "calls_check": "check(request" in source})
    with open(os.environ["MOSAIC_LEARNING_COLLECT"], "w", encoding="utf-8") as out:
        json.dump(found, out)
