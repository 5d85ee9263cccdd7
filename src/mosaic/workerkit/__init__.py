"""What a worker imports to be a worker: the contract, its config kit and shared run fields,
telemetry, checkpoint state, spaces, episode statistics, the evaluation loop, the script
runtime and the command line every worker shares. Nothing here imports the host or the clients."""
