"""The committed generated gRPC code matches mosaic_daemon.proto."""

from __future__ import annotations

import pytest

pytest.importorskip("grpc_tools", reason="grpcio-tools regenerates the code")

from mosaic.host.daemon.proto import generate  # noqa: E402


def test_generated_code_is_current(tmp_path):
    fresh = generate.generate(tmp_path)
    committed = generate.source_root() / "mosaic" / "host" / "daemon" / "proto"
    for path in fresh:
        assert path.read_bytes() == (committed / path.name).read_bytes(), (
            f"{path.name} is stale: run scripts/gen_proto and commit the result")


def test_service_has_every_call_of_the_api():
    from mosaic.host.daemon.proto import mosaic_daemon_pb2 as pb

    methods = set(pb.DESCRIPTOR.services_by_name["TrainerDaemon"].methods_by_name)
    assert methods == {"SubmitRun", "SubmitRuns", "CancelRun", "PauseRun", "ResumeRun", "ListRuns", "GetRun",
                       "WatchRuns", "StreamTelemetry", "ListWorkers", "DescribeWorker", "ValidateConfig", "GetHealth"}
