"""Webhook delivery: the deliverer task that sends what the outbox kept, signed, in order per
job and URL, retried with backoff (deliverer.py), over connections that reach only the hosts
`webhook_allowed_hosts` allows, checked at each connection (transport.py)."""
