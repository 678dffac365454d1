"""delta-sink and iceberg-sink: RocketMQ topics into lake tables that Spark writes itself."""
