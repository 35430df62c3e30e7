"""What a local or containerised Kafka node is configured with besides its listeners: the logging
configuration (log4j 2 for Kafka 4.x, reload4j for 3.x: the published POM brings no logging
backend, so without it the broker logs nothing), the broker settings sized for a small machine,
and a new KRaft cluster's id."""

from __future__ import annotations

import base64
import uuid

LOG4J2_XML = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <File name="server" fileName="${sys:kafka.logs.dir}/server.log">
      <PatternLayout pattern="[%d{ISO8601}] %p %m (%c)%n"/>
    </File>
    <File name="controller" fileName="${sys:kafka.logs.dir}/controller.log">
      <PatternLayout pattern="[%d{ISO8601}] %p %m (%c)%n"/>
    </File>
    <File name="stateChange" fileName="${sys:kafka.logs.dir}/state-change.log">
      <PatternLayout pattern="[%d{ISO8601}] %p %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Root level="INFO"><AppenderRef ref="server"/></Root>
    <Logger name="kafka.controller" level="INFO" additivity="false"><AppenderRef ref="controller"/></Logger>
    <Logger name="org.apache.kafka.controller" level="INFO" additivity="true"><AppenderRef ref="controller"/></Logger>
    <Logger name="state.change.logger" level="INFO" additivity="false"><AppenderRef ref="stateChange"/></Logger>
    <Logger name="kafka.request.logger" level="WARN"/>
    <Logger name="org.apache.kafka.storage.internals.log.LogCleaner" level="WARN"/>
  </Loggers>
</Configuration>
"""

# Kafka 3.x logs through reload4j (log4j 1 syntax).
LOG4J1_PROPERTIES = """log4j.rootLogger=INFO, server
log4j.appender.server=org.apache.log4j.FileAppender
log4j.appender.server.File=${kafka.logs.dir}/server.log
log4j.appender.server.layout=org.apache.log4j.PatternLayout
log4j.appender.server.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.appender.controller=org.apache.log4j.FileAppender
log4j.appender.controller.File=${kafka.logs.dir}/controller.log
log4j.appender.controller.layout=org.apache.log4j.PatternLayout
log4j.appender.controller.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.appender.stateChange=org.apache.log4j.FileAppender
log4j.appender.stateChange.File=${kafka.logs.dir}/state-change.log
log4j.appender.stateChange.layout=org.apache.log4j.PatternLayout
log4j.appender.stateChange.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.controller=INFO, controller
log4j.additivity.kafka.controller=false
log4j.logger.state.change.logger=INFO, stateChange
log4j.additivity.state.change.logger=false
log4j.logger.kafka.request.logger=WARN
"""

# Sized for three JVMs, Toxiproxy, a workload and Spark sharing two cores.
SMALL_MACHINE_DEFAULTS = {
    "num.network.threads": "2",
    "num.io.threads": "2",
    "num.replica.fetchers": "1",
    "num.recovery.threads.per.data.dir": "1",
    "background.threads": "4",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": "8388608",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
    "num.partitions": "3",
    "log.segment.bytes": "16777216",
    "log.retention.hours": "168",
    # Slow-machine timeouts: GC pauses and CPU starvation must not look like failures.
    "controller.quorum.election.timeout.ms": "3000",
    "controller.quorum.fetch.timeout.ms": "6000",
    "broker.session.timeout.ms": "12000",
    "broker.heartbeat.interval.ms": "1000",
    "replica.lag.time.max.ms": "15000",
    "transaction.max.timeout.ms": "300000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "5000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "60000",
    "share.coordinator.state.topic.segment.bytes": "16777216",
}


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (22 characters).

    Like Kafka's ``Uuid.randomUuid`` it never starts with ``-``: the storage tool's argument
    parser would take such an id for an option.
    """
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid
