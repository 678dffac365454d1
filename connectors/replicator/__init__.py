"""RocketMQ at both ends: RocketMQ Connect's Replicator (docs/replicator.md).

- ``source``: ``rocketmq-replicator`` copies topics of one RocketMQ cluster into another, exactly
  once, each queue's order kept (ReplicatorSourceConnector);
- ``checkpoint``: ``rocketmq-replicator-checkpoint`` translates consumer groups' offsets into the
  target cluster's and, opt-in, commits them there (ReplicatorCheckpointConnector);
- ``heartbeat``: ``rocketmq-replicator-heartbeat`` measures replication lag end to end
  (ReplicatorHeartbeatConnector).

``topics`` and ``translation`` are the pure planning rules under them, tested table by table.
"""
