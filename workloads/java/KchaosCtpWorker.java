// kchaos consume-transform-produce worker on the Java client (org.apache.kafka:kafka-clients).
//
// The same pipeline, history records and lineage as workloads/ctp_worker.py, but on the Java
// producer, which speaks KIP-890's transaction protocol (TV2: the producer epoch is bumped by
// every transaction's end) when the cluster has transaction.version=2 finalised (kafka-clients
// 4.0+). Every history line carries "txn_v2": whether the producer ran the transaction under TV2,
// read from the producer itself, and the producer id and epoch. One source for kafka-clients 3.x
// and 4.x: it uses no API newer than 2.7 (InvalidProducerEpochException), and reads the producer's
// state by reflection (workloads/registry.py: the releases it is built for).
//
//   java -cp <classes>:<kafka-clients jars> KchaosCtpWorker WORKER.properties
//
// Exit codes as the Python worker: 0 stopped (SIGTERM: the current transaction finishes),
// 10 fenced, 11 fatal, 12 outcome unknown (the harness restarts it from committed state).

import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class KchaosCtpWorker {
    static final int EXIT_STOPPED = 0, EXIT_FENCED = 10, EXIT_FATAL = 11, EXIT_UNKNOWN = 12;

    static final class Fenced extends RuntimeException { Fenced(String m) { super(m); } }
    static final class Fatal extends RuntimeException { Fatal(String m) { super(m); } }
    static final class UnknownOutcome extends RuntimeException { UnknownOutcome(String m) { super(m); } }

    // -- history: one JSON line per write, appended with a single write call -----------------
    static final class History {
        private final FileOutputStream out;
        private final String process;
        private int nextOp = 0;

        History(String path, String process) throws IOException {
            this.out = new FileOutputStream(path, true);
            this.process = process;
        }

        synchronized int invoke(String f, Map<String, Object> value, Map<String, Object> fields) {
            int op = nextOp++;
            write(op, "invoke", f, value, fields, null);
            return op;
        }

        synchronized void complete(int op, String f, String outcome, Map<String, Object> value,
                                   Map<String, Object> fields, String error) {
            write(op, outcome, f, value, fields, error);
        }

        synchronized void event(String f, Map<String, Object> value, String outcome, Map<String, Object> fields) {
            int op = invoke(f, value, fields);
            complete(op, f, outcome, value, fields, null);
        }

        private void write(int op, String type, String f, Map<String, Object> value, Map<String, Object> fields,
                           String error) {
            Map<String, Object> rec = new LinkedHashMap<>();
            rec.put("time", System.currentTimeMillis() / 1000.0);
            rec.put("process", process);
            rec.put("op", op);
            rec.put("type", type);
            rec.put("f", f);
            rec.put("value", value == null ? new LinkedHashMap<>() : value);
            if (fields != null) rec.putAll(fields);
            if (error != null) rec.put("error", error);
            byte[] line = (Json.write(rec) + "\n").getBytes(StandardCharsets.UTF_8);
            try {
                out.write(line);
            } catch (IOException e) {
                throw new Fatal("cannot write the history: " + e);
            }
        }

        synchronized void close() {
            try { out.close(); } catch (IOException ignored) { }
        }
    }

    // -- a small JSON writer (maps, lists, strings, numbers, booleans, null) -------------------
    static final class Json {
        static String write(Object o) {
            StringBuilder sb = new StringBuilder();
            put(sb, o);
            return sb.toString();
        }

        @SuppressWarnings("unchecked")
        private static void put(StringBuilder sb, Object o) {
            if (o == null) {
                sb.append("null");
            } else if (o instanceof String) {
                string(sb, (String) o);
            } else if (o instanceof Number || o instanceof Boolean) {
                sb.append(o);
            } else if (o instanceof Map) {
                sb.append('{');
                boolean first = true;
                for (Map.Entry<Object, Object> e : ((Map<Object, Object>) o).entrySet()) {
                    if (!first) sb.append(',');
                    first = false;
                    string(sb, String.valueOf(e.getKey()));
                    sb.append(':');
                    put(sb, e.getValue());
                }
                sb.append('}');
            } else if (o instanceof Collection) {
                sb.append('[');
                boolean first = true;
                for (Object x : (Collection<Object>) o) {
                    if (!first) sb.append(',');
                    first = false;
                    put(sb, x);
                }
                sb.append(']');
            } else {
                string(sb, o.toString());
            }
        }

        private static void string(StringBuilder sb, String s) {
            sb.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"': sb.append("\\\""); break;
                    case '\\': sb.append("\\\\"); break;
                    case '\n': sb.append("\\n"); break;
                    case '\r': sb.append("\\r"); break;
                    case '\t': sb.append("\\t"); break;
                    default:
                        if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
                        else sb.append(c);
                }
            }
            sb.append('"');
        }
    }

    static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        return m;
    }

    // -- settings ---------------------------------------------------------------------------
    final Properties conf;
    final String worker, process, txid, inputTopic;
    final int incarnation, outputsPerInput, maxBatch, processDelayMs;
    final String[] outputTopics;
    final double abortFraction;
    final History history;
    final Random rng;
    volatile boolean stopping = false;
    KafkaProducer<byte[], byte[]> producer;
    KafkaConsumer<byte[], byte[]> consumer;
    int txnSeq = 0;
    /** The first failed send of the current transaction. kafka-clients never sends EndTxn once a
     *  batch failed (the transaction turns abortable and the pending commit fails unsent), so a
     *  commit that fails after one is known not to have happened: abort and go on, as the
     *  KafkaProducer documentation asks, instead of exiting with an unknown outcome. */
    volatile Exception sendFailure;

    KchaosCtpWorker(Properties conf) throws IOException {
        this.conf = conf;
        this.worker = conf.getProperty("kchaos.worker");
        this.incarnation = Integer.parseInt(conf.getProperty("kchaos.incarnation"));
        this.process = worker + "." + incarnation;
        this.txid = conf.getProperty("kchaos.transactional.id");
        this.inputTopic = conf.getProperty("kchaos.input.topic");
        this.outputTopics = conf.getProperty("kchaos.output.topics").split(",");
        this.outputsPerInput = Integer.parseInt(conf.getProperty("kchaos.outputs.per.input"));
        this.maxBatch = Integer.parseInt(conf.getProperty("kchaos.max.batch"));
        this.processDelayMs = Integer.parseInt(conf.getProperty("kchaos.process.delay.ms"));
        this.abortFraction = Double.parseDouble(conf.getProperty("kchaos.abort.fraction"));
        this.history = new History(conf.getProperty("kchaos.history.path"), process);
        this.rng = new Random((conf.getProperty("kchaos.seed") + ":" + worker + ":" + incarnation).hashCode());
    }

    /** Client settings: every property that is not ours (kchaos.*). */
    Properties clientProps() {
        Properties p = new Properties();
        for (String name : conf.stringPropertyNames()) {
            if (!name.startsWith("kchaos.")) p.put(name, conf.getProperty(name));
        }
        return p;
    }

    /** The campaign's [workload.producer] / [workload.consumer] properties (kchaos.producer.NAME). */
    static Properties campaignProps(Properties conf, String table) {
        String prefix = "kchaos." + table + ".";
        Properties p = new Properties();
        for (String name : conf.stringPropertyNames()) {
            if (name.startsWith(prefix)) p.put(name.substring(prefix.length()), conf.getProperty(name));
        }
        return p;
    }

    /**
     * Validates the campaign's properties against kafka-clients' own definitions, before any
     * cluster starts: an unknown name (kafka-clients would only log a warning and ignore it) or
     * a value it cannot parse is an error. Prints one line per problem; exit 0 when all is well.
     */
    static int checkConfig(Properties conf) {
        List<String> problems = new ArrayList<>();
        String[][] tables = {{"producer"}, {"consumer"}};
        for (String[] t : tables) {
            String table = t[0];
            Properties given = campaignProps(conf, table);
            java.util.Set<String> known = table.equals("producer")
                ? org.apache.kafka.clients.producer.ProducerConfig.configNames()
                : org.apache.kafka.clients.consumer.ConsumerConfig.configNames();
            for (String name : given.stringPropertyNames()) {
                if (!known.contains(name)) problems.add("workload." + table + "." + name + ": not a kafka-clients "
                                                        + table + " property");
            }
            Properties p = new Properties();
            p.putAll(given);
            p.put("bootstrap.servers", "127.0.0.1:9");
            try {
                if (table.equals("producer")) {
                    p.put("key.serializer", ByteArraySerializer.class.getName());
                    p.put("value.serializer", ByteArraySerializer.class.getName());
                    new org.apache.kafka.clients.producer.ProducerConfig(p);
                } else {
                    p.put("key.deserializer", ByteArrayDeserializer.class.getName());
                    p.put("value.deserializer", ByteArrayDeserializer.class.getName());
                    new org.apache.kafka.clients.consumer.ConsumerConfig(p);
                }
            } catch (RuntimeException e) {
                problems.add("workload." + table + ": kafka-clients refuses it: " + e.getMessage());
            }
        }
        for (String problem : problems) System.out.println(problem);
        return problems.isEmpty() ? 0 : 2;
    }

    // -- what the producer knows about itself (not public API: read by reflection) ------------
    /** Adds the producer's id, epoch and whether it runs KIP-890 transactions ("txn_v2") to
     * {@code m}; leaves them null when this client release hides them (never a guess). Shared
     * with the Streams driver, whose producers kchaos observes through its client supplier. */
    static Map<String, Object> putProducerState(KafkaProducer<?, ?> producer, Map<String, Object> m) {
        m.put("pid", null);
        m.put("epoch", null);
        m.put("txn_v2", null);
        if (producer == null) return m;
        try {
            Field f = KafkaProducer.class.getDeclaredField("transactionManager");
            f.setAccessible(true);
            Object tm = f.get(producer);
            if (tm == null) return m;
            Method pe = tm.getClass().getDeclaredMethod("producerIdAndEpoch");
            pe.setAccessible(true);
            Object idAndEpoch = pe.invoke(tm);
            long pid = idAndEpoch.getClass().getField("producerId").getLong(idAndEpoch);
            short epoch = idAndEpoch.getClass().getField("epoch").getShort(idAndEpoch);
            if (pid >= 0) {
                m.put("pid", pid);
                m.put("epoch", (int) epoch);
            }
            Method v2;
            try {
                v2 = tm.getClass().getMethod("isTransactionV2Enabled");
            } catch (NoSuchMethodException e) {
                // kafka-clients 3.x has no KIP-890 part 2 at all: its transactions are classic,
                // a fact of the release (the same source compiles and runs on 3.x and 4.x)
                if (clientMajorVersion() < 4) m.put("txn_v2", false);
                return m;
            }
            m.put("txn_v2", v2.invoke(tm));
        } catch (ReflectiveOperationException | RuntimeException ignored) {
            // an unknown client release: the history then says null
        }
        return m;
    }

    /** The major release of the kafka-clients on the classpath (0 when it cannot be read). */
    static int clientMajorVersion() {
        try {
            String v = org.apache.kafka.common.utils.AppInfoParser.getVersion();
            return Integer.parseInt(v.substring(0, v.indexOf('.')));
        } catch (RuntimeException e) {
            return 0;
        }
    }

    Map<String, Object> fields() {
        return putProducerState(producer, map("worker", worker, "incarnation", incarnation, "txid", txid,
                                              "client", "java"));
    }

    // -- clients ----------------------------------------------------------------------------
    void newProducer() {
        Properties p = clientProps();
        p.putAll(campaignProps(conf, "producer"));  // kchaos' defaults, then the campaign's (client_settings.py)
        p.put("client.id", "kchaos-" + worker + "-producer");  // client_settings.client_id
        p.put("transactional.id", txid);
        p.put("transaction.timeout.ms", conf.getProperty("kchaos.transaction.timeout.ms"));
        p.put("enable.idempotence", "true");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        producer = new KafkaProducer<>(p);
        int op = history.invoke("init", map(), fields());
        try {
            producer.initTransactions();
        } catch (KafkaException e) {
            history.complete(op, "init", "fail", map(), fields(), e.toString());
            throw new Fatal("initTransactions failed: " + e);
        }
        history.complete(op, "init", "ok", map(), fields(), null);
    }

    void newConsumer() {
        Properties p = clientProps();
        int txnTimeout = Integer.parseInt(conf.getProperty("kchaos.transaction.timeout.ms"));
        // KIP-848's protocol: the broker owns the session, heartbeat and assignor, so the
        // classic-only settings below would be refused (and without group.protocol the
        // member joins a consumer group through the classic protocol instead)
        boolean classic = !"consumer".equals(conf.getProperty("kchaos.group.protocol", "classic"));
        // kchaos' defaults (client_settings.classic_consumer_defaults), then the campaign's
        if (classic) p.put("heartbeat.interval.ms", "1000");
        p.put("max.poll.interval.ms", String.valueOf(Math.max(60000, txnTimeout * 2)));
        p.putAll(campaignProps(conf, "consumer"));
        p.put("client.id", "kchaos-" + worker + "-consumer");
        p.put("group.id", conf.getProperty("kchaos.group.id"));
        String instance = conf.getProperty("kchaos.group.instance.id", "");
        if (!instance.isEmpty()) p.put("group.instance.id", instance);  // KIP-345 static membership
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("isolation.level", conf.getProperty("kchaos.isolation"));
        p.put("max.poll.records", String.valueOf(maxBatch));
        if (classic) {
            p.put("session.timeout.ms", conf.getProperty("kchaos.session.timeout.ms"));
            // librdkafka's default is "range,roundrobin": the same names, so the two clients can
            // share one classic consumer group
            p.put("partition.assignment.strategy", "org.apache.kafka.clients.consumer.RangeAssignor,"
                                                 + "org.apache.kafka.clients.consumer.RoundRobinAssignor");
        } else {
            p.put("group.protocol", "consumer");
        }
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        consumer = new KafkaConsumer<>(p);
    }

    final ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            history.event("assign", map("partitions", sortedPartitions(partitions)), "ok",
                          map("worker", worker, "incarnation", incarnation));
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            history.event("revoke", map("partitions", sortedPartitions(partitions)), "ok",
                          map("worker", worker, "incarnation", incarnation));
        }
    };

    static List<Integer> sortedPartitions(Collection<TopicPartition> partitions) {
        List<Integer> out = new ArrayList<>();
        for (TopicPartition tp : partitions) out.add(tp.partition());
        out.sort(null);
        return out;
    }

    // -- main loop --------------------------------------------------------------------------
    int run() {
        try {
            newProducer();
            newConsumer();
            consumer.subscribe(List.of(inputTopic), listener);
            while (!stopping) {
                ConsumerRecords<byte[], byte[]> polled = consumer.poll(Duration.ofMillis(500));
                if (polled.isEmpty()) continue;
                List<ConsumerRecord<byte[], byte[]>> msgs = new ArrayList<>();
                polled.forEach(msgs::add);
                recordPoll(msgs);
                processTransaction(msgs);
            }
            return EXIT_STOPPED;
        } catch (Fenced e) {
            history.event("fenced", map("reason", e.getMessage()), "info", fields());
            return EXIT_FENCED;
        } catch (Fatal e) {
            history.event("fatal", map("reason", e.getMessage()), "info", fields());
            return EXIT_FATAL;
        } catch (UnknownOutcome e) {
            history.event("exit-unknown", map("reason", e.getMessage()), "info", fields());
            return EXIT_UNKNOWN;
        } catch (ProducerFencedException | FencedInstanceIdException | InvalidProducerEpochException e) {
            history.event("fenced", map("reason", e.toString()), "info", fields());
            return EXIT_FENCED;
        } catch (KafkaException e) {  // outside a transaction step (poll, subscribe, close)
            history.event("fatal", map("reason", e.toString()), "info", fields());
            return EXIT_FATAL;
        } finally {
            close();
        }
    }

    void close() {
        if (consumer != null) {
            try { consumer.close(Duration.ofSeconds(5)); } catch (RuntimeException ignored) { }
        }
        if (producer != null) {
            try { producer.close(Duration.ofSeconds(5)); } catch (RuntimeException ignored) { }
        }
        history.close();
    }

    void recordPoll(List<ConsumerRecord<byte[], byte[]>> msgs) {
        Map<String, List<Long>> positions = new TreeMap<>();
        for (ConsumerRecord<byte[], byte[]> m : msgs) {
            List<Long> fl = positions.computeIfAbsent(String.valueOf(m.partition()),
                                                      k -> new ArrayList<>(List.of(m.offset(), m.offset())));
            fl.set(0, Math.min(fl.get(0), m.offset()));
            fl.set(1, Math.max(fl.get(1), m.offset()));
        }
        history.event("poll", map("count", msgs.size(), "positions", positions), "ok",
                      map("worker", worker, "incarnation", incarnation));
    }

    static boolean isFencing(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof ProducerFencedException || t instanceof FencedInstanceIdException
                    || t instanceof InvalidProducerEpochException) return true;
        }
        return false;
    }

    static boolean isFatal(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof OutOfOrderSequenceException || t instanceof AuthorizationException) return true;
        }
        return false;
    }

    String lineage(String inId, ConsumerRecord<byte[], byte[]> m, int slot, int seq) {
        return Json.write(map("in_id", inId, "in_topic", m.topic(), "in_partition", m.partition(),
                              "in_offset", m.offset(), "slot", slot, "slots", outputsPerInput, "worker", worker,
                              "incarnation", incarnation, "txid", txid, "txn_seq", seq));
    }

    void processTransaction(List<ConsumerRecord<byte[], byte[]>> msgs) {
        int seq = ++txnSeq;
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        Map<String, Object> offsetsJson = new TreeMap<>();
        List<List<Object>> inputs = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> m : msgs) {
            TopicPartition tp = new TopicPartition(m.topic(), m.partition());
            long next = m.offset() + 1;
            if (!offsets.containsKey(tp) || offsets.get(tp).offset() < next) offsets.put(tp, new OffsetAndMetadata(next));
            offsetsJson.put(String.valueOf(m.partition()), offsets.get(tp).offset());
            inputs.add(List.of(m.partition(), m.offset()));
        }
        try {
            producer.beginTransaction();
            sendFailure = null;
            int op = history.invoke("send", map("txn_seq", seq, "inputs", inputs), fields());
            int outputs = 0;
            for (ConsumerRecord<byte[], byte[]> m : msgs) {
                byte[] key = m.key() == null ? new byte[0] : m.key();
                String inId = new String(key, StandardCharsets.UTF_8);
                for (int j = 0; j < outputsPerInput; j++) {
                    producer.send(new ProducerRecord<>(outputTopics[j % outputTopics.length], key,
                                                       lineage(inId, m, j, seq).getBytes(StandardCharsets.UTF_8)),
                                  (metadata, e) -> { if (e != null && sendFailure == null) sendFailure = e; });
                    outputs++;
                }
            }
            history.complete(op, "send", "ok", map("outputs", outputs), fields(), null);
            if (processDelayMs > 0) Thread.sleep(processDelayMs);
            op = history.invoke("send_offsets", map("txn_seq", seq, "offsets", offsetsJson), fields());
            try {
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
            } catch (KafkaException e) {
                history.complete(op, "send_offsets", "fail", map("attempts", 1), fields(), e.toString());
                throw e;
            }
            history.complete(op, "send_offsets", "ok", map("attempts", 1), fields(), null);
            if (rng.nextDouble() < abortFraction) {
                producer.flush();  // the aborted outputs must reach the log: the raw view shows them
                abort(seq, "intentional");
                return;
            }
            commit(seq, offsetsJson);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new UnknownOutcome("interrupted in transaction " + seq);
        } catch (Fenced | Fatal | UnknownOutcome e) {
            throw e;
        } catch (KafkaException e) {
            if (isFencing(e)) throw new Fenced(e.toString());
            if (isFatal(e)) throw new Fatal(e.toString());
            abort(seq, "error: " + e);  // abortable: abort, rewind, go on
        }
    }

    void commit(int seq, Map<String, Object> offsetsJson) {
        int op = history.invoke("commit", map("txn_seq", seq, "offsets", offsetsJson), fields());
        int attempts = 0;
        while (true) {
            attempts++;
            try {
                producer.commitTransaction();
                history.complete(op, "commit", "ok", map("attempts", attempts), fields(), null);
                return;
            } catch (KafkaException e) {
                Exception failedSend = sendFailure;
                if (failedSend != null && !isFencing(e) && !isFatal(e)) {
                    // never sent (see sendFailure): definitely not committed; the caller aborts and goes on
                    history.complete(op, "commit", "fail", map("attempts", attempts), fields(),
                                     e + " (after a failed send of this transaction: " + failedSend + ")");
                    throw e;
                }
                boolean timeout = e instanceof TimeoutException;
                if (timeout && attempts < 5) continue;  // the Java producer allows retrying commitTransaction after a timeout
                // The commit may or may not have reached the coordinator: never guessed.
                history.complete(op, "commit", "info", map("attempts", attempts), fields(), e.toString());
                if (timeout) throw new UnknownOutcome("commit of transaction " + seq + " did not complete: " + e);
                if (isFencing(e)) throw new Fenced(e.toString());
                if (isFatal(e)) throw new Fatal(e.toString());
                throw new UnknownOutcome("commit of transaction " + seq + " failed: " + e);
            }
        }
    }

    void abort(int seq, String reason) {
        int op = history.invoke("abort", map("txn_seq", seq, "reason", reason), fields());
        try {
            producer.abortTransaction();
        } catch (KafkaException e) {
            history.complete(op, "abort", "info", map(), fields(), e.toString());
            if (isFencing(e)) throw new Fenced(e.toString());
            throw new Fatal("abort failed: " + e);
        }
        history.complete(op, "abort", "ok", map(), fields(), null);
        rewind();
    }

    /** Seek every assigned partition back to its committed offset (the start when none). */
    void rewind() {
        Set<TopicPartition> assignment = consumer.assignment();
        if (assignment.isEmpty()) return;
        Map<TopicPartition, OffsetAndMetadata> committed = null;
        for (int attempt = 0; attempt < 10 && committed == null; attempt++) {
            try {
                committed = consumer.committed(assignment, Duration.ofSeconds(10));
            } catch (TimeoutException e) {
                try { Thread.sleep(500L * (attempt + 1)); } catch (InterruptedException ie) { Thread.currentThread().interrupt(); }
            }
        }
        if (committed == null) throw new UnknownOutcome("could not read committed offsets to rewind after an abort");
        Map<String, Object> seeked = new TreeMap<>();
        for (TopicPartition tp : assignment) {
            OffsetAndMetadata om = committed.get(tp);
            if (om == null) {
                consumer.seekToBeginning(List.of(tp));
                seeked.put(String.valueOf(tp.partition()), -1001);
            } else {
                consumer.seek(tp, om.offset());
                seeked.put(String.valueOf(tp.partition()), om.offset());
            }
        }
        history.event("rewind", map("offsets", seeked), "ok", map("worker", worker, "incarnation", incarnation));
    }

    public static void main(String[] args) throws Exception {
        boolean check = args.length == 2 && args[0].equals("--check-config");
        if (args.length != 1 && !check) {
            System.err.println("usage: KchaosCtpWorker WORKER.properties | --check-config FILE.properties");
            System.exit(2);
        }
        Properties conf = new Properties();
        try (InputStream in = new FileInputStream(args[args.length - 1])) {
            conf.load(in);
        }
        if (check) {
            System.out.flush();
            Runtime.getRuntime().halt(checkConfig(conf));
        }
        KchaosCtpWorker w = new KchaosCtpWorker(conf);
        CountDownLatch done = new CountDownLatch(1);
        int[] exitCode = {EXIT_FATAL};
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            // SIGTERM: finish the current transaction, then leave the loop (poll returns within
            // 500 ms; no wakeup(), which could land inside a transaction step). The JVM would
            // exit 143 once this hook returns, so the hook exits with the worker's own code.
            w.stopping = true;
            try { done.await(); } catch (InterruptedException ignored) { }
            Runtime.getRuntime().halt(exitCode[0]);
        }));
        try {
            exitCode[0] = w.run();
        } finally {
            done.countDown();
        }
        System.out.flush();
        Runtime.getRuntime().halt(exitCode[0]);
    }
}
