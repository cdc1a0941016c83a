"""Kafka topics, client configuration and small helpers over confluent-kafka."""
