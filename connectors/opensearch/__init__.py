"""``opensearch-sink``: RocketMQ topics into OpenSearch (or Elasticsearch) indices, by bulk requests."""
