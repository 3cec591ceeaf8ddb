"""The floor export: the table's journal published to an MQTT broker, one way (docs/floor.md)."""
