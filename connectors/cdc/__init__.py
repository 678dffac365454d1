"""Change data capture: what every log-based source shares (the Debezium envelope, topic names)."""
