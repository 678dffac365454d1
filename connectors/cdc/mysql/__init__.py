"""mysql-cdc: MySQL/MariaDB binary-log change capture (connectors.cdc.mysql.source)."""
