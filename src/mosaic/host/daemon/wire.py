"""What the daemon and its clients agree on about the wire: gRPC channel options and the trailing-metadata
key of a refused config's field errors. Clients import this, not the server or the servicer."""

from __future__ import annotations

#: Telemetry lines may be up to 1 MiB (more once JSON-escaped); batches hold many.
MAX_MESSAGE_BYTES = 64 << 20
GRPC_OPTIONS = [("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.so_reuseport", 0)]
#: The trailing metadata that carries a refused config's field errors (JSON: ``[{field, message}]``).
FIELD_ERRORS_KEY = "mosaic-field-errors"
