"""The pipeline as a Spark application file, for spark-submit (`statefed pipeline
--print-app-path` prints where it is):

    spark-submit --master spark://host:7077 --name statefed-pipeline \\
        --driver-java-options=-Xss16m "$(statefed pipeline --print-app-path)"

It runs what `statefed pipeline` runs, with the same STATEFED_* settings (and takes the
same flags after the file); Spark's settings come from spark-submit (see pipeline.session).
The pipeline reads its input with Spark's Kafka connector, which must be on the driver's
and the executors' classpath: the pyspark of `make install` (and of the image) has it in
its jars/, so a master and workers started from that pyspark need nothing more; a Spark
installed otherwise takes it with `--packages
org.apache.spark:spark-sql-kafka-0-10_2.13:<tooling.connector.CONNECTOR_VERSION>`.

A catalogue of your own (STATEFED_CATALOGUE=myviews:CATALOGUE) is imported by the driver
alone, from the directory spark-submit runs in or from PYTHONPATH (schema.catalogue); where
the driver runs on another machine (cluster deploy mode), ship the module with
`--py-files myviews.py`. Executors never import it: they run Spark's plans only.
"""

import os
import sys


def _drop_own_directory() -> None:
    # Python puts a script's directory first on sys.path, and there this package's modules
    # (config, cli, ...) would shadow top-level modules of the same name
    if sys.path and os.path.realpath(sys.path[0]) == os.path.dirname(os.path.realpath(__file__)):
        del sys.path[0]


if __name__ == "__main__":
    _drop_own_directory()
    from tooling.cli import main

    main(["pipeline", *sys.argv[1:]])
