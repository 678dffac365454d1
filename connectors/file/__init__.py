"""Built-in file connectors (Kafka's FileStreamSource/Sink, made replayable by byte position)."""
