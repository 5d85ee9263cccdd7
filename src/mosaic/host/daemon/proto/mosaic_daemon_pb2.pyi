from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RunState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_STATE_UNSPECIFIED: _ClassVar[RunState]
    QUEUED: _ClassVar[RunState]
    STARTING: _ClassVar[RunState]
    RUNNING: _ClassVar[RunState]
    PAUSED: _ClassVar[RunState]
    COMPLETED: _ClassVar[RunState]
    FAILED: _ClassVar[RunState]
    CANCELLED: _ClassVar[RunState]
RUN_STATE_UNSPECIFIED: RunState
QUEUED: RunState
STARTING: RunState
RUNNING: RunState
PAUSED: RunState
COMPLETED: RunState
FAILED: RunState
CANCELLED: RunState

class RunInfo(_message.Message):
    __slots__ = ("run_id", "worker", "state", "config_digest", "created_at", "started_at", "ended_at", "has_exit_code", "exit_code", "exit_signal", "failure_reason", "pid", "run_dir", "algorithm", "env_id", "next_seq", "last_metrics_json", "cpus", "queue_position", "state_reason")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CONFIG_DIGEST_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    HAS_EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    EXIT_SIGNAL_FIELD_NUMBER: _ClassVar[int]
    FAILURE_REASON_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    RUN_DIR_FIELD_NUMBER: _ClassVar[int]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    ENV_ID_FIELD_NUMBER: _ClassVar[int]
    NEXT_SEQ_FIELD_NUMBER: _ClassVar[int]
    LAST_METRICS_JSON_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_POSITION_FIELD_NUMBER: _ClassVar[int]
    STATE_REASON_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    worker: str
    state: RunState
    config_digest: str
    created_at: float
    started_at: float
    ended_at: float
    has_exit_code: bool
    exit_code: int
    exit_signal: str
    failure_reason: str
    pid: int
    run_dir: str
    algorithm: str
    env_id: str
    next_seq: int
    last_metrics_json: str
    cpus: float
    queue_position: int
    state_reason: str
    def __init__(self, run_id: _Optional[str] = ..., worker: _Optional[str] = ..., state: _Optional[_Union[RunState, str]] = ..., config_digest: _Optional[str] = ..., created_at: _Optional[float] = ..., started_at: _Optional[float] = ..., ended_at: _Optional[float] = ..., has_exit_code: _Optional[bool] = ..., exit_code: _Optional[int] = ..., exit_signal: _Optional[str] = ..., failure_reason: _Optional[str] = ..., pid: _Optional[int] = ..., run_dir: _Optional[str] = ..., algorithm: _Optional[str] = ..., env_id: _Optional[str] = ..., next_seq: _Optional[int] = ..., last_metrics_json: _Optional[str] = ..., cpus: _Optional[float] = ..., queue_position: _Optional[int] = ..., state_reason: _Optional[str] = ...) -> None: ...

class SubmitRunRequest(_message.Message):
    __slots__ = ("config_json", "worker", "run_id", "heartbeat_timeout_s", "cpus")
    CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    config_json: str
    worker: str
    run_id: str
    heartbeat_timeout_s: float
    cpus: float
    def __init__(self, config_json: _Optional[str] = ..., worker: _Optional[str] = ..., run_id: _Optional[str] = ..., heartbeat_timeout_s: _Optional[float] = ..., cpus: _Optional[float] = ...) -> None: ...

class SubmitRunsRequest(_message.Message):
    __slots__ = ("runs",)
    RUNS_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[SubmitRunRequest]
    def __init__(self, runs: _Optional[_Iterable[_Union[SubmitRunRequest, _Mapping]]] = ...) -> None: ...

class SubmitRunResult(_message.Message):
    __slots__ = ("run", "error", "field_errors_json")
    RUN_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FIELD_ERRORS_JSON_FIELD_NUMBER: _ClassVar[int]
    run: RunInfo
    error: str
    field_errors_json: str
    def __init__(self, run: _Optional[_Union[RunInfo, _Mapping]] = ..., error: _Optional[str] = ..., field_errors_json: _Optional[str] = ...) -> None: ...

class SubmitRunsReply(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[SubmitRunResult]
    def __init__(self, results: _Optional[_Iterable[_Union[SubmitRunResult, _Mapping]]] = ...) -> None: ...

class RunControlRequest(_message.Message):
    __slots__ = ("run", "reason", "wait_s")
    RUN_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    WAIT_S_FIELD_NUMBER: _ClassVar[int]
    run: str
    reason: str
    wait_s: float
    def __init__(self, run: _Optional[str] = ..., reason: _Optional[str] = ..., wait_s: _Optional[float] = ...) -> None: ...

class GetRunRequest(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: str
    def __init__(self, run: _Optional[str] = ...) -> None: ...

class ListRunsRequest(_message.Message):
    __slots__ = ("states", "worker", "limit")
    STATES_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    states: _containers.RepeatedScalarFieldContainer[RunState]
    worker: str
    limit: int
    def __init__(self, states: _Optional[_Iterable[_Union[RunState, str]]] = ..., worker: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListRunsReply(_message.Message):
    __slots__ = ("runs",)
    RUNS_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[RunInfo]
    def __init__(self, runs: _Optional[_Iterable[_Union[RunInfo, _Mapping]]] = ...) -> None: ...

class WatchRunsRequest(_message.Message):
    __slots__ = ("run_ids", "include_current")
    RUN_IDS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_CURRENT_FIELD_NUMBER: _ClassVar[int]
    run_ids: _containers.RepeatedScalarFieldContainer[str]
    include_current: bool
    def __init__(self, run_ids: _Optional[_Iterable[str]] = ..., include_current: _Optional[bool] = ...) -> None: ...

class RunStateChange(_message.Message):
    __slots__ = ("run", "previous_state", "at", "snapshot")
    RUN_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_STATE_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    run: RunInfo
    previous_state: RunState
    at: float
    snapshot: bool
    def __init__(self, run: _Optional[_Union[RunInfo, _Mapping]] = ..., previous_state: _Optional[_Union[RunState, str]] = ..., at: _Optional[float] = ..., snapshot: _Optional[bool] = ...) -> None: ...

class StreamTelemetryRequest(_message.Message):
    __slots__ = ("run", "from_seq", "follow")
    RUN_FIELD_NUMBER: _ClassVar[int]
    FROM_SEQ_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    run: str
    from_seq: int
    follow: bool
    def __init__(self, run: _Optional[str] = ..., from_seq: _Optional[int] = ..., follow: _Optional[bool] = ...) -> None: ...

class TelemetryEvent(_message.Message):
    __slots__ = ("seq", "type", "json")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    seq: int
    type: str
    json: str
    def __init__(self, seq: _Optional[int] = ..., type: _Optional[str] = ..., json: _Optional[str] = ...) -> None: ...

class TelemetryBatch(_message.Message):
    __slots__ = ("events", "replay")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    REPLAY_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[TelemetryEvent]
    replay: bool
    def __init__(self, events: _Optional[_Iterable[_Union[TelemetryEvent, _Mapping]]] = ..., replay: _Optional[bool] = ...) -> None: ...

class ListWorkersRequest(_message.Message):
    __slots__ = ("refresh",)
    REFRESH_FIELD_NUMBER: _ClassVar[int]
    refresh: bool
    def __init__(self, refresh: _Optional[bool] = ...) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ("name", "entry_point", "version", "description", "upstream_library", "upstream_version", "paradigms", "policy_configurations", "env_families", "algorithms", "supports_pause_resume", "supports_checkpointing", "cpus", "memory_mb", "gpus", "metadata_json", "capabilities_json", "algo_params_schema_json", "python")
    class AlgoParamsSchemaJsonEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    ENTRY_POINT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_LIBRARY_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_VERSION_FIELD_NUMBER: _ClassVar[int]
    PARADIGMS_FIELD_NUMBER: _ClassVar[int]
    POLICY_CONFIGURATIONS_FIELD_NUMBER: _ClassVar[int]
    ENV_FAMILIES_FIELD_NUMBER: _ClassVar[int]
    ALGORITHMS_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_PAUSE_RESUME_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_CHECKPOINTING_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_JSON_FIELD_NUMBER: _ClassVar[int]
    ALGO_PARAMS_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    PYTHON_FIELD_NUMBER: _ClassVar[int]
    name: str
    entry_point: str
    version: str
    description: str
    upstream_library: str
    upstream_version: str
    paradigms: _containers.RepeatedScalarFieldContainer[str]
    policy_configurations: _containers.RepeatedScalarFieldContainer[str]
    env_families: _containers.RepeatedScalarFieldContainer[str]
    algorithms: _containers.RepeatedScalarFieldContainer[str]
    supports_pause_resume: bool
    supports_checkpointing: bool
    cpus: float
    memory_mb: int
    gpus: float
    metadata_json: str
    capabilities_json: str
    algo_params_schema_json: _containers.ScalarMap[str, str]
    python: str
    def __init__(self, name: _Optional[str] = ..., entry_point: _Optional[str] = ..., version: _Optional[str] = ..., description: _Optional[str] = ..., upstream_library: _Optional[str] = ..., upstream_version: _Optional[str] = ..., paradigms: _Optional[_Iterable[str]] = ..., policy_configurations: _Optional[_Iterable[str]] = ..., env_families: _Optional[_Iterable[str]] = ..., algorithms: _Optional[_Iterable[str]] = ..., supports_pause_resume: _Optional[bool] = ..., supports_checkpointing: _Optional[bool] = ..., cpus: _Optional[float] = ..., memory_mb: _Optional[int] = ..., gpus: _Optional[float] = ..., metadata_json: _Optional[str] = ..., capabilities_json: _Optional[str] = ..., algo_params_schema_json: _Optional[_Mapping[str, str]] = ..., python: _Optional[str] = ...) -> None: ...

class BrokenWorkerInfo(_message.Message):
    __slots__ = ("name", "entry_point", "reason")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ENTRY_POINT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    name: str
    entry_point: str
    reason: str
    def __init__(self, name: _Optional[str] = ..., entry_point: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ListWorkersReply(_message.Message):
    __slots__ = ("workers", "broken")
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    BROKEN_FIELD_NUMBER: _ClassVar[int]
    workers: _containers.RepeatedCompositeFieldContainer[WorkerInfo]
    broken: _containers.RepeatedCompositeFieldContainer[BrokenWorkerInfo]
    def __init__(self, workers: _Optional[_Iterable[_Union[WorkerInfo, _Mapping]]] = ..., broken: _Optional[_Iterable[_Union[BrokenWorkerInfo, _Mapping]]] = ...) -> None: ...

class DescribeWorkerRequest(_message.Message):
    __slots__ = ("name", "refresh")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REFRESH_FIELD_NUMBER: _ClassVar[int]
    name: str
    refresh: bool
    def __init__(self, name: _Optional[str] = ..., refresh: _Optional[bool] = ...) -> None: ...

class WorkerDescription(_message.Message):
    __slots__ = ("name", "describe_json", "config_schema_json", "default_config_json", "python")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIBE_JSON_FIELD_NUMBER: _ClassVar[int]
    CONFIG_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    PYTHON_FIELD_NUMBER: _ClassVar[int]
    name: str
    describe_json: str
    config_schema_json: str
    default_config_json: str
    python: str
    def __init__(self, name: _Optional[str] = ..., describe_json: _Optional[str] = ..., config_schema_json: _Optional[str] = ..., default_config_json: _Optional[str] = ..., python: _Optional[str] = ...) -> None: ...

class ValidateConfigRequest(_message.Message):
    __slots__ = ("config_json",)
    CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    config_json: str
    def __init__(self, config_json: _Optional[str] = ...) -> None: ...

class ValidateConfigReply(_message.Message):
    __slots__ = ("ok", "normalized_config_json", "error")
    OK_FIELD_NUMBER: _ClassVar[int]
    NORMALIZED_CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    normalized_config_json: str
    error: str
    def __init__(self, ok: _Optional[bool] = ..., normalized_config_json: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class GetHealthRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Health(_message.Message):
    __slots__ = ("version", "pid", "started_at", "uptime_s", "home", "address", "token_required", "runs_by_state", "max_concurrent_runs", "cpu_budget", "cpus_in_use", "workers", "broken_workers")
    class RunsByStateEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    UPTIME_S_FIELD_NUMBER: _ClassVar[int]
    HOME_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    RUNS_BY_STATE_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENT_RUNS_FIELD_NUMBER: _ClassVar[int]
    CPU_BUDGET_FIELD_NUMBER: _ClassVar[int]
    CPUS_IN_USE_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    BROKEN_WORKERS_FIELD_NUMBER: _ClassVar[int]
    version: str
    pid: int
    started_at: float
    uptime_s: float
    home: str
    address: str
    token_required: bool
    runs_by_state: _containers.ScalarMap[str, int]
    max_concurrent_runs: int
    cpu_budget: float
    cpus_in_use: float
    workers: int
    broken_workers: int
    def __init__(self, version: _Optional[str] = ..., pid: _Optional[int] = ..., started_at: _Optional[float] = ..., uptime_s: _Optional[float] = ..., home: _Optional[str] = ..., address: _Optional[str] = ..., token_required: _Optional[bool] = ..., runs_by_state: _Optional[_Mapping[str, int]] = ..., max_concurrent_runs: _Optional[int] = ..., cpu_budget: _Optional[float] = ..., cpus_in_use: _Optional[float] = ..., workers: _Optional[int] = ..., broken_workers: _Optional[int] = ...) -> None: ...
