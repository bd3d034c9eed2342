"""``cer match --spark``: the same queries, evaluated on a Spark cluster.

The plan's ``fanout`` (``cer_cli.plan.fanout``) says how a query is spread (per PARTITION BY
key, per range of positions with the window's context, or one task); ``job.spark_match`` /
``job.spark_write`` run it. pyspark is an optional dependency (``cer-cli[spark]``); it is
imported only when a job runs. ``match`` (``frames``) is the DataFrame API: a Spark
DataFrame in, the long format's matches out, lazily.
"""

from cer_cli.spark.frames import match
from cer_cli.spark.job import SparkError, spark_match, spark_schema, spark_session, spark_write

__all__ = ["SparkError", "match", "spark_match", "spark_schema", "spark_session", "spark_write"]
