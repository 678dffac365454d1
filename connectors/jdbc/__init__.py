"""JDBC-style database connectors (Kafka Connect JDBC's keys) for MySQL/MariaDB and PostgreSQL."""
