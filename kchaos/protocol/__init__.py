"""Kafka's protocol as kchaos reads and writes it: the wire primitives, the request and response
layouts the message proxy and the front need, the internal topics' records, and a raw
InitProducerId and transactional Produce. Pure, except raw_init's and raw_produce's single
connection to a broker; it imports only the foundation."""
