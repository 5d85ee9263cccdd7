"""What hosts runs: discovery of installed workers, their Python environments, the launcher that
starts a worker process and records its telemetry, and the trainer daemon."""
