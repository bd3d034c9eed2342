"""``cer match --spark``: the same queries, evaluated on a Spark cluster.

``plan.plan_for`` chooses how a compiled query fans out (per PARTITION BY key, per range
of positions with the window's context, or one task) and ``job.spark_match`` /
``job.spark_write`` run it. pyspark is an optional dependency (``cer-cli[spark]``); it is
imported only when a job runs.
"""

from cer_cli.spark.job import SparkError, spark_match, spark_schema, spark_session, spark_write
from cer_cli.spark.plan import SparkPlan, plan_for

__all__ = [
    "SparkError", "SparkPlan", "plan_for", "spark_match", "spark_schema", "spark_session",
    "spark_write",
]
