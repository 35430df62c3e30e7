// kchaos' Kafka Streams pipeline: a real Streams application (org.apache.kafka:kafka-streams)
// under kchaos' faults, with exactly_once_v2 (default) or at_least_once (a negative control).
//
// The topology is one processor: each input record becomes K outputs to T topics carrying the
// lineage contract (workloads/lineage.py), read from the record's own metadata (topic,
// partition, offset). Streams owns everything else: its producers (one per stream thread
// under exactly_once_v2), their transactional ids, when it commits and when it aborts.
//
// kchaos observes without changing that behaviour through Streams' public KafkaClientSupplier:
// each producer Streams asks for is a KafkaProducer wrapped by RecordingProducer, which writes
// the transaction calls Streams makes (init, begin -> send, sendOffsetsToTransaction, commit,
// abort) to the history, and completes each output's lineage with the transactional id and the
// transaction's sequence number as it passes through send(). State transitions and the input
// partitions of the local tasks are history events too.
//
//   java -cp <classes>:<kafka-streams jars> KchaosStreamsApp WORKER.properties
//
// Exit codes as the other workers: 0 stopped (SIGTERM: Streams closes cleanly), 11 fatal (the
// Streams client reached ERROR; the harness restarts the instance).

import java.io.FileInputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.streams.KafkaClientSupplier;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;

public final class KchaosStreamsApp {
    static final int EXIT_STOPPED = 0, EXIT_FATAL = 11;

    final Properties conf;
    final String worker, process, inputTopic, guarantee;
    final int incarnation, outputsPerInput;
    final String[] outputTopics;
    final KchaosCtpWorker.History history;
    /** One sequence per process, shared by every stream thread's producer: (worker, incarnation,
     * txn_seq) names one transaction, as the lineage contract requires. */
    final AtomicInteger txnSeq = new AtomicInteger();

    KchaosStreamsApp(Properties conf) throws Exception {
        this.conf = conf;
        this.worker = conf.getProperty("kchaos.worker");
        this.incarnation = Integer.parseInt(conf.getProperty("kchaos.incarnation"));
        this.process = worker + "." + incarnation;
        this.inputTopic = conf.getProperty("kchaos.input.topic");
        this.outputTopics = conf.getProperty("kchaos.output.topics").split(",");
        this.outputsPerInput = Integer.parseInt(conf.getProperty("kchaos.outputs.per.input"));
        this.guarantee = conf.getProperty("kchaos.streams.guarantee");
        this.history = new KchaosCtpWorker.History(conf.getProperty("kchaos.history.path"), process);
    }

    boolean exactlyOnce() {
        return guarantee.startsWith("exactly_once");
    }

    Map<String, Object> who() {
        return KchaosCtpWorker.map("worker", worker, "incarnation", incarnation);
    }

    // -- the topology ------------------------------------------------------------------------
    /** Input -> K outputs with lineage. The transactional id and the transaction's sequence
     * number are not known here; RecordingProducer appends them to the value in send(). */
    final class LineageProcessor implements Processor<byte[], byte[], byte[], byte[]> {
        ProcessorContext<byte[], byte[]> context;

        @Override
        public void init(ProcessorContext<byte[], byte[]> context) {
            this.context = context;
        }

        @Override
        public void process(Record<byte[], byte[]> record) {
            org.apache.kafka.streams.processor.api.RecordMetadata meta = context.recordMetadata().orElseThrow();
            byte[] key = record.key() == null ? new byte[0] : record.key();
            String inId = new String(key, StandardCharsets.UTF_8);
            for (int j = 0; j < outputsPerInput; j++) {
                String value = KchaosCtpWorker.Json.write(KchaosCtpWorker.map(
                    "in_id", inId, "in_topic", meta.topic(), "in_partition", meta.partition(),
                    "in_offset", meta.offset(), "slot", j, "slots", outputsPerInput, "worker", worker,
                    "incarnation", incarnation));
                context.forward(record.withKey(key).withValue(value.getBytes(StandardCharsets.UTF_8)),
                                "out-" + (j % outputTopics.length));
            }
        }
    }

    Topology topology() {
        Topology t = new Topology();
        t.addSource("in", new ByteArrayDeserializer(), new ByteArrayDeserializer(), inputTopic);
        t.addProcessor("lineage", LineageProcessor::new, "in");
        for (int i = 0; i < outputTopics.length; i++) {
            t.addSink("out-" + i, outputTopics[i], new ByteArraySerializer(), new ByteArraySerializer(), "lineage");
        }
        return t;
    }

    // -- observing Streams' producers ----------------------------------------------------------
    /** Delegates every call to Streams' own KafkaProducer; records the transaction calls. */
    final class RecordingProducer implements Producer<byte[], byte[]> {
        final KafkaProducer<byte[], byte[]> inner;
        final String txid;
        int seq;             // the open transaction (exactly-once) or the current flush batch (at-least-once)
        Integer sendOp;      // the open "send" operation of this transaction
        final List<List<Object>> inputs = new ArrayList<>();
        final TreeSet<String> seenInputs = new TreeSet<>();
        int outputs;
        Map<String, Object> txnOffsets = new TreeMap<>();  // of the open transaction, for its commit record

        RecordingProducer(Map<String, Object> config) {
            this.inner = new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer());
            Object id = config.get("transactional.id");
            this.txid = id == null ? null : id.toString();
            if (!exactlyOnce()) seq = txnSeq.incrementAndGet();
        }

        Map<String, Object> fields() {
            Map<String, Object> m = KchaosCtpWorker.map("worker", worker, "incarnation", incarnation, "txid", txid,
                                                        "client", "streams");
            return KchaosCtpWorker.putProducerState(inner, m);
        }

        /** The sends of this transaction end where Streams sends its offsets, commits or aborts. */
        synchronized void completeSends() {
            if (sendOp == null) return;
            history.complete(sendOp, "send", "ok",
                             KchaosCtpWorker.map("inputs", new ArrayList<>(inputs), "outputs", outputs), fields(), null);
            sendOp = null;
        }

        /** One of Streams' producer calls as a history operation: ok when it returns; when it
         * throws, {@code failed} ("fail", or "info" where the outcome is not known), and the
         * exception goes back to Streams, which decides what happens next. */
        void recorded(String f, Map<String, Object> value, String failed, Runnable call) {
            int op = history.invoke(f, value, fields());
            try {
                call.run();
            } catch (RuntimeException e) {
                history.complete(op, f, failed, KchaosCtpWorker.map(), fields(), e.toString());
                throw e;
            }
            history.complete(op, f, "ok", KchaosCtpWorker.map(), fields(), null);
        }

        @Override
        public void initTransactions() {
            recorded("init", KchaosCtpWorker.map(), "fail", inner::initTransactions);
        }

        @Override
        public synchronized void beginTransaction() {
            inner.beginTransaction();
            seq = txnSeq.incrementAndGet();
            txnOffsets = new TreeMap<>();
            openSends();
        }

        /** A transaction's (at-least-once: a flush batch's) sends begin: the "send" operation. */
        synchronized void openSends() {
            inputs.clear();
            seenInputs.clear();
            outputs = 0;
            sendOp = history.invoke("send", KchaosCtpWorker.map("txn_seq", seq), fields());
        }

        /** The lineage's last two fields, known only here: which producer and which transaction. */
        synchronized ProducerRecord<byte[], byte[]> complete(ProducerRecord<byte[], byte[]> r) {
            if (!exactlyOnce() && sendOp == null) openSends();  // at-least-once: a batch's sends end at the flush
            String v = new String(r.value(), StandardCharsets.UTF_8);
            int p = v.indexOf("\"in_partition\":"), o = v.indexOf("\"in_offset\":");
            if (v.endsWith("}") && p >= 0 && o >= 0) {
                String part = v.substring(p + 15, v.indexOf(',', p)), off = v.substring(o + 12, v.indexOf(',', o));
                if (seenInputs.add(part + ":" + off)) inputs.add(List.of(Integer.parseInt(part), Long.parseLong(off)));
                outputs++;
                v = v.substring(0, v.length() - 1) + ",\"txid\":" + KchaosCtpWorker.Json.write(txid)
                    + ",\"txn_seq\":" + seq + "}";
            }
            return new ProducerRecord<>(r.topic(), r.partition(), r.timestamp(), r.key(),
                                        v.getBytes(StandardCharsets.UTF_8), r.headers());
        }

        @Override
        public Future<org.apache.kafka.clients.producer.RecordMetadata> send(ProducerRecord<byte[], byte[]> r) {
            return inner.send(complete(r));
        }

        @Override
        public Future<org.apache.kafka.clients.producer.RecordMetadata> send(ProducerRecord<byte[], byte[]> r, Callback callback) {
            return inner.send(complete(r), callback);
        }

        @Override
        public void sendOffsetsToTransaction(Map<TopicPartition, OffsetAndMetadata> offsets,
                                             ConsumerGroupMetadata group) {
            completeSends();
            Map<String, Object> json = new TreeMap<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                if (e.getKey().topic().equals(inputTopic)) json.put(String.valueOf(e.getKey().partition()), e.getValue().offset());
            }
            txnOffsets = json;
            recorded("send_offsets", KchaosCtpWorker.map("txn_seq", seq, "offsets", json), "fail",
                     () -> inner.sendOffsetsToTransaction(offsets, group));
        }

        @Override
        public void commitTransaction() {
            completeSends();
            // a commit that throws may or may not have taken effect: never guessed
            recorded("commit", KchaosCtpWorker.map("txn_seq", seq, "offsets", txnOffsets), "info",
                     inner::commitTransaction);
        }

        @Override
        public void abortTransaction() {
            completeSends();
            recorded("abort", KchaosCtpWorker.map("txn_seq", seq, "reason", "streams"), "info", inner::abortTransaction);
        }

        @Override
        public synchronized void flush() {
            inner.flush();
            // at-least-once: Streams flushes, then commits the consumer's offsets (not observed
            // here: the consumer is Streams' own); the next outputs belong to the next batch
            if (!exactlyOnce()) {
                completeSends();
                seq = txnSeq.incrementAndGet();
            }
        }

        @Override public void registerMetricForSubscription(KafkaMetric m) { inner.registerMetricForSubscription(m); }
        @Override public void unregisterMetricFromSubscription(KafkaMetric m) { inner.unregisterMetricFromSubscription(m); }
        @Override public List<PartitionInfo> partitionsFor(String topic) { return inner.partitionsFor(topic); }
        @Override public Map<MetricName, ? extends Metric> metrics() { return inner.metrics(); }
        @Override public Uuid clientInstanceId(Duration timeout) { return inner.clientInstanceId(timeout); }
        @Override public void close() { inner.close(); }
        @Override public void close(Duration timeout) { inner.close(timeout); }
    }

    final class RecordingSupplier implements KafkaClientSupplier {
        @Override public Admin getAdmin(Map<String, Object> config) { return Admin.create(config); }
        @Override public Producer<byte[], byte[]> getProducer(Map<String, Object> config) { return new RecordingProducer(config); }
        @Override public Consumer<byte[], byte[]> getConsumer(Map<String, Object> config) { return consumer(config); }
        @Override public Consumer<byte[], byte[]> getRestoreConsumer(Map<String, Object> config) { return consumer(config); }
        @Override public Consumer<byte[], byte[]> getGlobalConsumer(Map<String, Object> config) { return consumer(config); }

        Consumer<byte[], byte[]> consumer(Map<String, Object> config) {
            return new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        }
    }

    // -- settings ----------------------------------------------------------------------------
    Properties streamsProps() {
        Properties p = new Properties();
        for (String name : conf.stringPropertyNames()) {
            if (!name.startsWith("kchaos.")) p.put(name, conf.getProperty(name));  // bootstrap.servers, security
        }
        // kchaos' defaults and the campaign's [workload.producer] / [workload.consumer], as
        // Streams' prefixed client properties
        KchaosCtpWorker.campaignProps(conf, "producer").forEach((k, v) -> p.put(StreamsConfig.producerPrefix((String) k), v));
        KchaosCtpWorker.campaignProps(conf, "consumer").forEach((k, v) -> p.put(StreamsConfig.consumerPrefix((String) k), v));
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, conf.getProperty("kchaos.group.id"));
        p.put(StreamsConfig.CLIENT_ID_CONFIG, "kchaos-" + worker);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, conf.getProperty("kchaos.streams.threads"));
        String commitInterval = conf.getProperty("kchaos.streams.commit.interval.ms", "");
        if (!commitInterval.isEmpty()) p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, commitInterval);
        p.put(StreamsConfig.STATE_DIR_CONFIG, conf.getProperty("kchaos.streams.state.dir"));
        p.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), conf.getProperty("kchaos.transaction.timeout.ms"));
        if ("streams".equals(conf.getProperty("kchaos.streams.group.protocol", "classic"))) {
            // KIP-1071: the broker's streams group assigns tasks; the session is the broker's
            // (group.streams.session.timeout.ms), so no consumer session settings. The name as a
            // string: StreamsConfig has no constant for it before 4.1
            p.put("group.protocol", "streams");
        } else {
            p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), conf.getProperty("kchaos.session.timeout.ms"));
            p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), "1000");
        }
        // at-least-once would otherwise read uncommitted inputs: the negative control is about
        // duplicates, so it reads what exactly-once reads (exactly_once_v2 forces read_committed)
        if (!exactlyOnce()) p.put(StreamsConfig.consumerPrefix("isolation.level"), conf.getProperty("kchaos.isolation"));
        return p;
    }

    // -- run ---------------------------------------------------------------------------------
    private List<Integer> lastAssigned = null;

    /** The input partitions of this instance's active tasks, as an ``assign`` event: always on
     *  entering RUNNING, and when they change while it runs (the streams protocol can hand out
     *  tasks without a state change; checked every ASSIGNMENT_CHECK_MS). */
    synchronized void recordAssignment(KafkaStreams streams, boolean always) {
        TreeSet<Integer> partitions = new TreeSet<>();
        try {
            for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
                for (TaskMetadata task : thread.activeTasks()) {
                    for (TopicPartition tp : task.topicPartitions()) {
                        if (tp.topic().equals(inputTopic)) partitions.add(tp.partition());
                    }
                }
            }
        } catch (IllegalStateException notRunning) {
            return;
        }
        List<Integer> now = new ArrayList<>(partitions);
        if (!always && now.equals(lastAssigned)) return;
        lastAssigned = now;
        history.event("assign", KchaosCtpWorker.map("partitions", now), "ok", who());
    }

    static final long ASSIGNMENT_CHECK_MS = 2000;

    int run() throws InterruptedException {
        KafkaStreams streams = new KafkaStreams(topology(), streamsProps(), new RecordingSupplier());
        CountDownLatch ended = new CountDownLatch(1);
        int[] code = {EXIT_STOPPED};
        streams.setStateListener((to, from) -> {
            history.event("streams-state", KchaosCtpWorker.map("from", from.name(), "to", to.name()), "ok", who());
            if (to == KafkaStreams.State.RUNNING) recordAssignment(streams, true);
            if (to == KafkaStreams.State.ERROR) code[0] = EXIT_FATAL;
            if (to == KafkaStreams.State.ERROR || to == KafkaStreams.State.NOT_RUNNING) ended.countDown();
        });
        streams.setUncaughtExceptionHandler(e -> {
            history.event("fatal", KchaosCtpWorker.map("reason", e.toString()), "info", who());
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            // SIGTERM: Streams commits what it processed and leaves the group
            streams.close(Duration.ofSeconds(30));
            history.close();
            Runtime.getRuntime().halt(code[0]);
        }));
        ScheduledExecutorService watch = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "kchaos-assignment-watch");
            t.setDaemon(true);
            return t;
        });
        watch.scheduleWithFixedDelay(() -> {
            if (streams.state() == KafkaStreams.State.RUNNING) recordAssignment(streams, false);
        }, ASSIGNMENT_CHECK_MS, ASSIGNMENT_CHECK_MS, TimeUnit.MILLISECONDS);
        streams.start();
        ended.await();
        watch.shutdownNow();
        streams.close(Duration.ofSeconds(30));
        history.close();
        return code[0];
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: KchaosStreamsApp WORKER.properties");
            System.exit(2);
        }
        Properties conf = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            conf.load(in);
        }
        int code = new KchaosStreamsApp(conf).run();
        System.out.flush();
        Runtime.getRuntime().halt(code);
    }
}
