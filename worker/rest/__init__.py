"""`sluice rest`: RocketMQ Connect's and Kafka Connect's REST APIs over the connector workflows.

The server holds no state: every call is a query or update of a ConnectorWorkflow through
:class:`sluice.worker.client.SluiceClient` (docs/operating.md, "REST API").
"""
