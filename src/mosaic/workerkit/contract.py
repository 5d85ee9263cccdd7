"""The worker contract: what every MOSAIC worker provides.

Workers implement these `typing.Protocol`s structurally (no base class to
inherit) and describe themselves with two frozen dataclasses that discovery
reads without starting anything heavy.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Protocol, runtime_checkable

#: The entry-point group a worker registers its ``get_worker_metadata`` under.
ENTRY_POINT_GROUP = "mosaic.workers"
#: The agent id of a single-agent env, wherever a worker names one (telemetry, evaluation, players).
SINGLE_AGENT = "agent_0"

#: Values a capability field may take; discovery rejects anything else so a
#: typo in a plugin shows up as a broken worker instead of a silent mismatch.
#: Env families are not among them: each worker declares its own vocabulary
#: (``env_families``, and the ids in its describe document's ``envs``): PettingZoo's
#: four, single-agent Gymnasium ids, a library's own suites.
PARADIGMS = ("single_agent", "multi_agent")
POLICY_CONFIGURATIONS = (
    "PARAMETER_SHARING",  # one policy for every agent (of a kind)
    "INDEPENDENT",  # one policy per agent
    "SELF_PLAY",  # against frozen copies of itself
    "SHARED_VALUE_FUNCTION",  # decentralised actors, one central critic (MAPPO)
    "VALUE_DECOMPOSITION",  # per-agent utilities mixed into a joint value (VDN, QMIX)
    "RANDOM",
    "LANGUAGE_MODEL",  # a language model prompted with a text description of each observation
)
SPACE_KINDS = ("discrete", "multi_discrete", "box", "dict", "image", "masked_discrete")


@runtime_checkable
class WorkerConfig(Protocol):
    """A worker's run configuration: serialisable, seeded, tied to one run."""

    run_id: str
    seed: int

    def to_dict(self) -> dict[str, Any]: ...

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "WorkerConfig": ...


@runtime_checkable
class WorkerRuntime(Protocol):
    """Runs one configured job to the end and returns a JSON-able summary."""

    def run(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class WorkerMetadata:
    """Who the worker is and what upstream library it wraps."""

    name: str
    version: str
    description: str
    upstream_library: str
    upstream_version: str
    license: str
    homepage: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ResourceEstimate:
    """Rough needs of a typical run, so a scheduler can budget CPUs and memory."""

    cpus: float = 1.0
    memory_mb: int = 512
    gpus: float = 0.0


@dataclass(frozen=True)
class WorkerCapabilities:
    """What a worker can do. Claim a capability only where a test proves it."""

    worker_type: str
    paradigms: tuple[str, ...]
    policy_configurations: tuple[str, ...]
    env_families: tuple[str, ...]
    algorithms: tuple[str, ...]
    action_spaces: tuple[str, ...]
    observation_spaces: tuple[str, ...]
    max_agents: int
    supports_self_play: bool = False
    supports_population: bool = False
    supports_checkpointing: bool = False
    supports_pause_resume: bool = False
    requires_gpu: bool = False
    resources: ResourceEstimate = field(default_factory=ResourceEstimate)

    def problems(self) -> list[str]:
        """Inconsistencies in the declaration itself (empty when valid)."""
        found: list[str] = []
        checks = (
            ("paradigms", self.paradigms, PARADIGMS),
            ("policy_configurations", self.policy_configurations, POLICY_CONFIGURATIONS),
            ("action_spaces", self.action_spaces, SPACE_KINDS),
            ("observation_spaces", self.observation_spaces, SPACE_KINDS),
        )
        for name, values, allowed in checks:
            for value in values:
                if value not in allowed:
                    found.append(f"{name}: {value!r} is not one of {', '.join(allowed)}")
        if not self.worker_type:
            found.append("worker_type: must not be empty")
        if self.max_agents < 1:
            found.append(f"max_agents: {self.max_agents} must be >= 1")
        if self.supports_self_play and "SELF_PLAY" not in self.policy_configurations:
            found.append("supports_self_play is set but SELF_PLAY is not a policy configuration")
        if self.supports_population and not self.supports_self_play:
            found.append("supports_population (league training) is set but supports_self_play is not")
        return found

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)



@dataclass(frozen=True)
class Packages:
    """The distributions a worker runs with, named once: ``--describe`` and ``run_started`` report them.

    ``required`` must be installed where the worker runs (``--describe`` refuses otherwise); ``optional``
    ones are reported when installed. MOSAIC itself (``mosaic-marl``) and python are always reported.
    """

    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()

    @classmethod
    def of(cls, value: "Packages | Iterable[str]") -> "Packages":
        return value if isinstance(value, Packages) else cls(tuple(value))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(("mosaic-marl", *self.required, *self.optional)))

    def versions(self) -> dict[str, str]:
        """python and every named distribution that is installed, with its version."""
        from mosaic.provenance import package_versions

        return package_versions(self.names)

    def __iter__(self):  # the required ones, as the tuple ``packages`` once was
        return iter(self.required)


def worker_metadata(*, name: str, version: str, description: str, upstream: str, license: str = "MIT",
                    homepage: str = "", resources: Mapping[str, Any] | None = None,
                    **capabilities: Any) -> tuple[WorkerMetadata, WorkerCapabilities]:
    """A worker's ``get_worker_metadata`` answer from what differs between workers.

    ``upstream`` is the library it wraps as pip names it (extras allowed: ``ray[rllib]``); its installed
    version is looked up (``"not installed"`` where it is not). ``resources`` are a
    :class:`ResourceEstimate`'s fields; the rest are :class:`WorkerCapabilities`' fields.
    """
    from mosaic.provenance import installed_version

    meta = WorkerMetadata(name=name, version=version, description=description, upstream_library=upstream,
                          upstream_version=installed_version(upstream.partition("[")[0]), license=license,
                          homepage=homepage)
    caps = WorkerCapabilities(resources=ResourceEstimate(**(resources or {})), **capabilities)
    return meta, caps
