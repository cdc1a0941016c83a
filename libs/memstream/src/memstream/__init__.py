"""memstream: agent memory as a stream-processing pipeline on Kafka."""
