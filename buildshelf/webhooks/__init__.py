"""Webhooks: the targets file, the payload formats, the outbox and the delivery threads."""
