"""Every installed worker describes itself; the document is checked, cached and kept fresh.

Real worker processes (``python -m <worker>.cli --describe``) in their own interpreter.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import jsonschema
import pytest

from mosaic.host import describe_cache

from mosaic.workerkit import describe
from mosaic.host.discovery import discover_workers
from mosaic.host.launcher import worker_command

WORKERS = discover_workers()


def test_the_document_schema_is_a_json_schema():
    jsonschema.Draft202012Validator.check_schema(describe.DOCUMENT_SCHEMA)


@pytest.mark.parametrize("name", WORKERS.names())
def test_every_installed_worker_describes_itself_validly(name, documents):
    worker, document = WORKERS.get(name), documents[name]
    assert describe.problems(document) == []
    assert document["worker"] == name and document["cli_module"] == worker.cli_module
    assert document["entry_point"] == worker.entry_point
    assert document["python"] == (worker.python or sys.executable)
    assert document["metadata"] == worker.metadata.to_dict()
    assert document["capabilities"]["algorithms"] == list(worker.capabilities.algorithms)
    upstream = document["metadata"]["upstream_library"].split("[")[0]
    assert document["versions"].get(upstream) == document["metadata"]["upstream_version"]  # the real one
    config = {**document["default_config"], "run_id": "describe-test"}
    jsonschema.validate(config, document["config_schema"])
    for algorithm in document["algo_params_schemas"]:
        assert algorithm in worker.capabilities.algorithms
    families = set(document["envs"])
    assert families <= set(worker.capabilities.env_families)


@pytest.mark.parametrize("name", WORKERS.names())
def test_the_config_schema_rejects_what_the_worker_rejects(name, documents):
    """A wrong type and an unknown field: the worker's --validate and its schema agree."""
    schema = documents[name]["config_schema"]
    base = {**documents[name]["default_config"], "run_id": "describe-test"}
    for bad in ({**base, "seed": "not-a-number"}, {**base, "no_such_field": 1}):
        assert list(jsonschema.Draft202012Validator(schema).iter_errors(bad))
        proc = subprocess.run([*worker_command(WORKERS.get(name)), "--validate", "--config", "-"],
                              input=json.dumps(bad), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2, proc.stderr


def test_a_document_with_a_mistake_is_refused(documents):
    good = documents["random"]
    for path, value in ((("describe_version",), 2), (("capabilities", "max_agents"), 0),
                        (("versions", "mosaic-marl"), None), (("config_schema",), {"type": "no-such-type"}),
                        (("flags",), "--describe")):
        bad = copy.deepcopy(good)
        node = bad
        for key in path[:-1]:
            node = node[key]
        if value is None:
            del node[path[-1]]
        else:
            node[path[-1]] = value
        assert describe.problems(bad), path
    bad = copy.deepcopy(good)
    bad["unexpected"] = True
    assert describe.problems(bad)


def test_answers_are_cached_and_an_edited_source_describes_again(tmp_path, monkeypatch):
    monkeypatch.setenv(describe_cache.CACHE_VAR, str(tmp_path / "cache"))
    worker = WORKERS.get("random")
    package = tmp_path / "random_worker_copy"
    package.mkdir()
    source = package / "marker.py"
    source.write_text("x = 1\n")
    first = describe_cache.load(sys.executable, worker.cli_module, [package])
    cached = list((tmp_path / "cache" / "describe").glob("*.json"))
    assert len(cached) == 1
    # the cache answers as long as nothing changed: a tampered entry is what comes back
    entry = json.loads(cached[0].read_text())
    entry["answer"]["metadata"]["description"] = "from the cache"
    cached[0].write_text(json.dumps(entry))
    assert describe_cache.load(sys.executable, worker.cli_module, [package])["metadata"]["description"] == "from the cache"
    # an edited source file (an editable install changed) makes a new key: described afresh
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    fresh = describe_cache.load(sys.executable, worker.cli_module, [package])
    assert fresh == first and len(list((tmp_path / "cache" / "describe").glob("*.json"))) == 2


def test_a_worker_that_does_not_run_gives_a_clear_reason():
    with pytest.raises(describe_cache.DescribeError, match="no_such_worker_pkg.cli --describe` failed"):
        describe_cache.run_describe(sys.executable, "no_such_worker_pkg.cli")
    with pytest.raises(describe_cache.DescribeError, match="does not exist"):
        describe_cache.run_describe("/nonexistent/python", "random_worker.cli")
