"""cer — complex event recognition over event logs (CEQL queries on CSV / Parquet / NDJSON)."""

__version__ = "0.1.0"
