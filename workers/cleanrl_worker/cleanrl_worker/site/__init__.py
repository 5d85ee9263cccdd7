"""Put on a CleanRL script's ``PYTHONPATH`` so that its ``sitecustomize`` runs first."""
