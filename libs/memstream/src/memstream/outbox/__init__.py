"""The outbox: accepted events spooled to disk until the archive holds them."""
