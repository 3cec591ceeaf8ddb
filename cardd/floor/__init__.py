"""cardfloor: the floor's service. It receives every table's export (docs/floor.md) from MQTT,
archives it in PostgreSQL, checks each table's export chain and raises the floor's alarms, and
serves the pit over HTTP (docs/floor-service.md). It shares nothing with a table but the topic
contract (:mod:`cardd.floor.contract`): no module here imports the table's code."""
