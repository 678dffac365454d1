"""PostgreSQL sink connector (exactly once: rows and positions commit in one transaction).

Cheap to import: pyspark is imported only when a batch is written.
"""

from sluice.connectors.postgres.sink import PostgresSinkConnector, PostgresSinkError, PostgresSinkTask

__all__ = ["PostgresSinkConnector", "PostgresSinkError", "PostgresSinkTask"]
