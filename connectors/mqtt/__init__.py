"""MQTT ↔ RocketMQ: ``mqtt-source`` (subscriptions into topics) and ``mqtt-sink`` (topics published
to an MQTT broker), with RocketMQ Connect's MQTT connector keys accepted as aliases (docs/mqtt.md)."""
