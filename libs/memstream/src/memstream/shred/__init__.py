"""Crypto-shredding: content sealed under data keys kept outside the log.

Every copy of an event's content that the system writes (raw and ledger topics, the archive,
dead letters, latents and checkout traces built from it) is sealed with AES-256-GCM under a
data key of its own. The keys live in a key store outside Kafka (:mod:`memstream.shred.port`);
a purge destroys them, and every copy becomes unreadable at once, in every topic, segment and
backup, while the hash chain still verifies over the sealed form it covered.
"""
