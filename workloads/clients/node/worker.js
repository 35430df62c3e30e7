// kchaos' consume-transform-produce worker on KafkaJS.
//
// It follows KafkaJS's documented exactly-once pattern (docs/Transactions.md: "Sending Offsets"):
// a transactional producer (maxInFlightRequests 1, idempotent) and a consumer with autoCommit off;
// per transaction: producer.transaction(), transaction.send, transaction.sendOffsets({
// consumerGroupId, topics }), transaction.commit(), and transaction.abort() when anything fails.
// KafkaJS sends TxnOffsetCommit v0/v1 with the group id only (no generation or member id: no
// KIP-447 fencing) and EndTxn v0/v1 (no KIP-890 part 2).
//
// The consumer runs eachBatch (eachBatchAutoResolve off): each fetched batch is cut into
// transactions of at most max_batch inputs; after each commit the last input is resolved and the
// consumer heartbeats. After an abort the consumer is sought back to the transaction's first input
// (consumer.seek) and the batch is left: the inputs are fetched again.
//
// The producer id and epoch come from KafkaJS's own debug log ("Initialized producer id & epoch");
// KafkaJS does not otherwise expose them.
//
// KafkaJS has no static membership (KIP-345): its consumer takes no group instance id (the
// protocol encoders have the field; broker.joinGroup never passes one). With
// workload.static_membership the worker joins as a dynamic member and says so in its first history
// line (settings: not_honoured), as kchaos passes it (workloads/native_clients.not_honoured).
//
// Exit codes: 0 stopped (SIGTERM: the current transaction finishes), 10 fenced, 11 fatal,
// 12 outcome unknown (a commit that failed leaves KafkaJS's producer in COMMITTING for good).
'use strict'

const fs = require('fs')
const crypto = require('crypto')
const { Kafka, logLevel } = require('kafkajs')

const EXIT = { stopped: 0, fenced: 10, fatal: 11, unknown: 12 }
const FENCED = new Set(['PRODUCER_FENCED', 'INVALID_PRODUCER_EPOCH', 'TRANSACTIONAL_ID_AUTHORIZATION_FAILED'])

const configPath = process.argv[2] || process.env.KCHAOS_WORKER_CONFIG
const config = JSON.parse(fs.readFileSync(configPath, 'utf8'))
const wl = config.workload
const process_ = `${config.worker}.${config.incarnation}`
const transactional = wl.delivery === 'exactly-once'
const txid = transactional ? `${config.txid_prefix}-${config.worker}` : null
for (const key of Object.keys(config.client)) {
  if (key !== 'bootstrap.servers') {
    process.stderr.write(`kchaos kafkajs worker: client setting ${key} is not supported (plaintext clusters only)\n`)
    process.exit(EXIT.fatal)
  }
}
const prop = (table, name) => {
  const v = (config.properties[table] || {})[name]
  return v === undefined ? undefined : Number(v)
}

// -- history (workloads/history.py): one appendFileSync per line on an O_APPEND descriptor -------
const historyFd = fs.openSync(config.history_path, 'a')
let nextOp = 0
let producerId = null
let producerEpoch = null
const fields = () => ({ worker: config.worker, incarnation: config.incarnation, txid, pid: producerId,
  epoch: producerEpoch, client: 'kafkajs' })
const slotFields = () => ({ worker: config.worker, incarnation: config.incarnation })
const write = (op, type, f, value, extra, error) => {
  const rec = { ...extra, time: Date.now() / 1000, process: process_, op, type, f, value: value || {} }
  if (error) rec.error = String(error && error.message ? `${error.name}: ${error.message}` : error)
  fs.writeSync(historyFd, JSON.stringify(rec) + '\n')
}
const invoke = (f, value, extra) => { const op = nextOp++; write(op, 'invoke', f, value, extra); return op }
const complete = (op, f, outcome, value, extra, error) => write(op, outcome, f, value, extra, error)
const event = (f, value, outcome, extra) => { const op = invoke(f, value, extra); write(op, outcome, f, value, extra) }

// seeded aborts: one stream per (seed, worker, incarnation)
let rngState = crypto.createHash('sha256').update(`${config.seed}:${config.worker}:${config.incarnation}`).digest()
let rngIndex = 0
const random = () => {
  if (rngIndex + 4 > rngState.length) { rngState = crypto.createHash('sha256').update(rngState).digest(); rngIndex = 0 }
  const v = rngState.readUInt32BE(rngIndex); rngIndex += 4
  return v / 4294967296
}

// KafkaJS logs through logCreator: keep the producer id and epoch, print warnings and errors
const logCreator = () => ({ level, log }) => {
  if (log.message === 'Initialized producer id & epoch') {
    producerId = Number(log.producerId); producerEpoch = Number(log.producerEpoch)
  }
  if (level <= logLevel.WARN) {
    const { message, timestamp, logger, ...rest } = log
    process.stderr.write(`${(Date.now() / 1000).toFixed(3)} ${level === logLevel.ERROR ? 'ERROR' : 'WARN'} ${message} ${JSON.stringify(rest)}\n`)
  }
}

class Exit extends Error {
  constructor (code, f, reason) { super(reason); this.code = code; this.f = f }
}

const typeOf = e => { for (let x = e; x; x = x.cause) { if (x.type) return x.type } return null }
const isFenced = e => { for (let x = e; x; x = x.cause) { if (FENCED.has(x.type)) return true } return false }

const brokers = config.client['bootstrap.servers'].split(',')
const base = { brokers, logLevel: logLevel.DEBUG, logCreator,
  ...(prop('producer', 'request.timeout.ms') ? { requestTimeout: prop('producer', 'request.timeout.ms') } : {}),
  ...(prop('producer', 'retry.backoff.ms') ? { retry: { initialRetryTime: prop('producer', 'retry.backoff.ms') } } : {}) }
const producerKafka = new Kafka({ ...base, clientId: `kchaos-${config.worker}-producer` })
const consumerKafka = new Kafka({ ...base, clientId: `kchaos-${config.worker}-consumer` })

const producer = producerKafka.producer(transactional
  ? { transactionalId: txid, maxInFlightRequests: 1, idempotent: true, transactionTimeout: wl.transaction_timeout_ms }
  : { idempotent: wl.delivery === 'at-least-once', maxInFlightRequests: wl.delivery === 'at-least-once' ? 1 : 5 })
const rebalanceTimeout = prop('consumer', 'max.poll.interval.ms') || Math.max(60000, 2 * wl.transaction_timeout_ms)
const consumer = consumerKafka.consumer({ groupId: wl.group_id, sessionTimeout: wl.session_timeout_ms,
  heartbeatInterval: 1000, rebalanceTimeout, readUncommitted: wl.isolation === 'read_uncommitted',
  maxBytesPerPartition: 1048576,
  ...(prop('consumer', 'fetch.max.wait.ms') ? { maxWaitTimeInMs: prop('consumer', 'fetch.max.wait.ms') } : {}) })

let stopping = false
let txnSeq = 0
let fatalExit = null
let inTransaction = Promise.resolve() // the transaction under way: a graceful stop lets it end

const finish = async code => {
  if (code === EXIT.stopped) await Promise.race([inTransaction, new Promise(r => setTimeout(r, 30000))])
  try { await Promise.race([consumer.disconnect(), new Promise(r => setTimeout(r, 5000))]) } catch (e) {}
  try { await Promise.race([producer.disconnect(), new Promise(r => setTimeout(r, 5000))]) } catch (e) {}
  fs.closeSync(historyFd)
  process.exit(code)
}

const die = async e => {
  if (fatalExit) return
  fatalExit = e
  const ex = e instanceof Exit ? e : new Exit(isFenced(e) ? EXIT.fenced : EXIT.fatal, isFenced(e) ? 'fenced' : 'fatal',
    `${e.name}: ${e.message}`)
  event(ex.f, { reason: ex.message }, 'info', fields())
  await finish(ex.code)
}

// eachBatch's messages carry no topic or partition: the batch does
const outputsOf = (batchTopic, partition, msgs, seq) => {
  const byTopic = new Map()
  for (const m of msgs) {
    const inId = m.key ? m.key.toString() : ''
    for (let j = 0; j < wl.outputs_per_input; j++) {
      const topic = wl.output_topics[j % wl.output_topics.length]
      const value = JSON.stringify({ in_id: inId, in_topic: batchTopic, in_partition: partition,
        in_offset: Number(m.offset), slot: j, slots: wl.outputs_per_input, worker: config.worker,
        incarnation: config.incarnation, txid, txn_seq: seq })
      if (!byTopic.has(topic)) byTopic.set(topic, [])
      byTopic.get(topic).push({ key: m.key, value })
    }
  }
  return [...byTopic.entries()].map(([topic, messages]) => ({ topic, messages }))
}

const count = topicMessages => topicMessages.reduce((n, t) => n + t.messages.length, 0)
const sleep = ms => new Promise(r => setTimeout(r, ms))

// one transaction; returns false when the consumer was sought back (the batch must be left)
const transaction = async (topic, partition, msgs) => {
  const seq = ++txnSeq
  const first = msgs[0]
  const last = msgs[msgs.length - 1]
  const offsets = { [partition]: Number(last.offset) + 1 }
  const txn = await producer.transaction()
  let step = 'send'
  let op = invoke('send', { txn_seq: seq, inputs: msgs.map(m => [partition, Number(m.offset)]) }, fields())
  const rewind = reason => {
    consumer.seek({ topic, partition, offset: first.offset })
    event('rewind', { offsets: { [partition]: Number(first.offset) }, reason }, 'ok', slotFields())
    return false
  }
  try {
    const outs = outputsOf(topic, partition, msgs, seq)
    await txn.sendBatch({ topicMessages: outs })
    complete(op, 'send', 'ok', { outputs: count(outs) }, fields())
    if (wl.process_delay_ms > 0) await sleep(wl.process_delay_ms)
    step = 'send_offsets'
    op = invoke('send_offsets', { txn_seq: seq, offsets }, fields())
    await txn.sendOffsets({ consumerGroupId: wl.group_id,
      topics: [{ topic, partitions: [{ partition, offset: String(Number(last.offset) + 1) }] }] })
    complete(op, 'send_offsets', 'ok', { attempts: 1 }, fields())
    if (random() < wl.abort_fraction) {
      // sendBatch has waited for every acknowledgement: the aborted outputs are in the log
      step = 'abort'
      op = invoke('abort', { txn_seq: seq, reason: 'intentional' }, fields())
      await txn.abort()
      complete(op, 'abort', 'ok', {}, fields())
      return rewind('intentional abort')
    }
    step = 'commit'
    op = invoke('commit', { txn_seq: seq, offsets }, fields())
    await txn.commit()
    complete(op, 'commit', 'ok', { attempts: 1 }, fields())
    return true
  } catch (e) {
    if (step === 'commit') {
      // KafkaJS leaves the producer in COMMITTING after a failed EndTxn: neither a retry nor an abort
      // is allowed, and whether the commit happened is unknown
      complete(op, 'commit', 'info', { attempts: 1 }, fields(), e)
      if (isFenced(e)) throw new Exit(EXIT.fenced, 'fenced', `commit: ${e.message}`)
      throw new Exit(EXIT.unknown, 'exit-unknown', `commit of transaction ${seq} did not complete: ${e.name}: ${e.message}`)
    }
    if (step === 'abort') {
      complete(op, 'abort', 'info', {}, fields(), e)
      throw new Exit(isFenced(e) ? EXIT.fenced : EXIT.fatal, isFenced(e) ? 'fenced' : 'fatal', `abort failed: ${e.message}`)
    }
    complete(op, step, 'fail', step === 'send' ? {} : { attempts: 1 }, fields(), e)
    if (isFenced(e)) throw new Exit(EXIT.fenced, 'fenced', `${step}: ${e.message}`)
    // the documented pattern: abort the transaction when anything in it failed
    op = invoke('abort', { txn_seq: seq, reason: `error: ${typeOf(e) || e.name}: ${e.message}` }, fields())
    try {
      if (txn.isActive()) await txn.abort()
    } catch (abortError) {
      complete(op, 'abort', 'info', {}, fields(), abortError)
      if (isFenced(abortError)) throw new Exit(EXIT.fenced, 'fenced', `abort: ${abortError.message}`)
      throw new Exit(EXIT.fatal, 'fatal', `abort failed: ${abortError.message}`)
    }
    complete(op, 'abort', 'ok', {}, fields())
    return rewind(`after ${step} failed`)
  }
}

// negative control: send, wait for the acknowledgements, then commit the offsets with the consumer
const atLeastOnce = async (topic, partition, msgs) => {
  const seq = ++txnSeq
  const last = msgs[msgs.length - 1]
  let op = invoke('send', { txn_seq: seq, inputs: msgs.map(m => [partition, Number(m.offset)]) }, fields())
  const outs = outputsOf(topic, partition, msgs, seq)
  try {
    await producer.sendBatch({ topicMessages: outs, acks: -1 })
  } catch (e) {
    complete(op, 'send', 'info', { outputs: count(outs) }, fields(), e)
    throw new Exit(EXIT.unknown, 'exit-unknown', `outputs not acknowledged: ${e.message}`)
  }
  if (wl.process_delay_ms > 0) await sleep(wl.process_delay_ms)
  complete(op, 'send', 'ok', { outputs: count(outs), unflushed: 0 }, fields())
  const offsets = { [partition]: Number(last.offset) + 1 }
  op = invoke('commit_offsets', { txn_seq: seq, offsets }, fields())
  try {
    await consumer.commitOffsets([{ topic, partition, offset: String(Number(last.offset) + 1) }])
    complete(op, 'commit_offsets', 'ok', {}, fields())
  } catch (e) {
    complete(op, 'commit_offsets', 'fail', {}, fields(), e)
  }
  return true
}

const main = async () => {
  // how the consumer joins (always dynamically) and what the campaign asked that it cannot do
  event('settings', { group_id: wl.group_id, group_instance_id: null, session_timeout_ms: wl.session_timeout_ms,
    rebalance_timeout_ms: rebalanceTimeout, not_honoured: config.not_honoured || {} }, 'ok',
  { ...slotFields(), client: 'kafkajs' })
  const onSignal = () => { stopping = true }
  process.on('SIGTERM', onSignal)
  process.on('SIGINT', onSignal)
  // KafkaJS rebalances eagerly: REBALANCING gives up everything the last join assigned
  let held = []
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    held = ((payload.memberAssignment || {})[wl.input_topic] || []).slice().sort((a, b) => a - b)
    event('assign', { partitions: held }, 'ok', slotFields())
  })
  consumer.on(consumer.events.REBALANCING, () => {
    event('revoke', { partitions: held }, 'ok', slotFields())
    held = []
  })
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    process.stderr.write(`${(Date.now() / 1000).toFixed(3)} consumer crash (restart: ${payload.restart}): ${payload.error && payload.error.message}\n`)
    if (!payload.restart) die(payload.error)
  })
  await producer.connect()
  if (transactional) {
    // KafkaJS initialises the producer id with the first transaction; kchaos asks for it at start
    // through that same first transaction (begun and aborted empty: no request is sent for it)
    const op = invoke('init', {}, fields())
    try {
      const txn = await producer.transaction()
      await txn.abort()
    } catch (e) {
      complete(op, 'init', 'fail', {}, fields(), e)
      throw e
    }
    complete(op, 'init', 'ok', {}, fields())
  }
  await consumer.connect()
  await consumer.subscribe({ topics: [wl.input_topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
      const msgs = batch.messages
      for (let i = 0; i < msgs.length; i += wl.max_batch) {
        if (stopping || fatalExit || !isRunning() || isStale()) return
        const chunk = msgs.slice(i, i + wl.max_batch)
        const positions = { [batch.partition]: [Number(chunk[0].offset), Number(chunk[chunk.length - 1].offset)] }
        event('poll', { count: chunk.length, positions }, 'ok', slotFields())
        let kept
        try {
          const step = transactional ? transaction(batch.topic, batch.partition, chunk)
            : atLeastOnce(batch.topic, batch.partition, chunk)
          inTransaction = step.catch(() => {})
          kept = await step
        } catch (e) {
          // not awaited: die() disconnects the consumer, which waits for this eachBatch to return;
          // awaiting it here held the exit to finish()'s 5 s timer, without a LeaveGroup
          die(e)
          return
        }
        if (!kept) return
        resolveOffset(chunk[chunk.length - 1].offset)
        await heartbeat()
      }
    }
  })
  while (!stopping && !fatalExit) await sleep(100)
  if (!fatalExit) await finish(EXIT.stopped)
}

main().catch(e => die(e))
