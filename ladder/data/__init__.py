"""Metric data: the sources (wandb cloud, wandb offline files, run folders, CSV and parquet tables), the local
store, what real runs log settled once (resolve), and a run as the laws see it (runview, fitdata)."""
