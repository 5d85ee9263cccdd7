"""The daemon's gRPC API: ``mosaic_daemon.proto`` and the code generated from it.

The generated modules are committed (regenerate with ``scripts/gen_proto``);
``tests/daemon/test_proto.py`` fails when they are out of date.
"""
