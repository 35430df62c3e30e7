// F10's reduced case: one member of a streams group (KIP-1071), no fault, no Kafka Streams, only
// StreamsGroupHeartbeat requests on a socket to the group coordinator. The answer that carries the
// member's tasks is read and then treated as lost: the member asks again at its previous epoch, as
// the Streams client does after a heartbeat that failed or timed out (its owned tasks: none yet).
// Compile and run against a release's kafka-clients jar (with slf4j-api); a broker with
// streams.version=1 at ARGS[0] (host:port, the group coordinator: a one-node cluster).
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.message.StreamsGroupHeartbeatRequestData;
import org.apache.kafka.common.message.StreamsGroupHeartbeatResponseData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.requests.StreamsGroupHeartbeatRequest;
import org.apache.kafka.common.requests.StreamsGroupHeartbeatResponse;

public class StreamsHeartbeatRetry {
    static final String GROUP = "f10-reduced-" + UUID.randomUUID().toString().substring(0, 8);
    static final String TOPIC = GROUP + "-in";
    static final String MEMBER = UUID.randomUUID().toString();
    static int correlation = 0;

    static StreamsGroupHeartbeatResponseData send(DataOutputStream out, DataInputStream in,
                                                  StreamsGroupHeartbeatRequestData data) throws Exception {
        short version = 0;
        RequestHeader header = new RequestHeader(ApiKeys.STREAMS_GROUP_HEARTBEAT, version, "f10-reduced", ++correlation);
        ByteBuffer request = new StreamsGroupHeartbeatRequest.Builder(data).build(version).serializeWithHeader(header);
        out.writeInt(request.remaining());
        out.write(request.array(), request.arrayOffset() + request.position(), request.remaining());
        out.flush();
        byte[] answer = new byte[in.readInt()];
        in.readFully(answer);
        return ((StreamsGroupHeartbeatResponse) AbstractResponse.parseResponse(ByteBuffer.wrap(answer), header)).data();
    }

    static StreamsGroupHeartbeatRequestData heartbeat(int epoch) {
        // what a member sends when nothing changed: null for every field it does not repeat
        return new StreamsGroupHeartbeatRequestData().setGroupId(GROUP).setMemberId(MEMBER).setMemberEpoch(epoch)
            .setRebalanceTimeoutMs(-1).setTopology(null).setActiveTasks(null).setStandbyTasks(null).setWarmupTasks(null)
            .setProcessId(null).setUserEndpoint(null).setClientTags(null).setTaskOffsets(null).setTaskEndOffsets(null);
    }

    static String show(String what, StreamsGroupHeartbeatRequestData req, StreamsGroupHeartbeatResponseData res) {
        return String.format("%-44s request epoch %d, owned active tasks %s -> error %s, epoch %d, active tasks %s",
            what, req.memberEpoch(), req.activeTasks() == null ? "null (unchanged)" : tasks(req.activeTasks()),
            Errors.forCode(res.errorCode()) + (res.errorMessage() != null ? " (" + res.errorMessage() + ")" : ""),
            res.memberEpoch(),
            res.activeTasks() == null ? "null (unchanged)" : res.activeTasks().toString());
    }

    static String tasks(List<StreamsGroupHeartbeatRequestData.TaskIds> ids) {
        List<String> out = new ArrayList<>();
        for (StreamsGroupHeartbeatRequestData.TaskIds t : ids) out.add(t.subtopologyId() + ":" + t.partitions());
        return out.toString();
    }

    public static void main(String[] args) throws Exception {
        String[] hostPort = args[0].split(":");
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(props)) {
            admin.createTopics(List.of(new NewTopic(TOPIC, 2, (short) 1))).all().get();
            // a FindCoordinator creates __consumer_offsets, which the group coordinator needs
            try {
                admin.listConsumerGroupOffsets(GROUP).partitionsToOffsetAndMetadata().get();
            } catch (Exception ignored) {
                // the group does not exist yet: the coordinator was found, which is all we need
            }
        }
        try (Socket socket = new Socket(hostPort[0], Integer.parseInt(hostPort[1]))) {
            DataOutputStream out = new DataOutputStream(socket.getOutputStream());
            DataInputStream in = new DataInputStream(socket.getInputStream());
            // join: the topology (one subtopology reading the topic: 2 tasks), no tasks owned
            StreamsGroupHeartbeatRequestData join = new StreamsGroupHeartbeatRequestData().setGroupId(GROUP)
                .setMemberId(MEMBER).setMemberEpoch(0).setRebalanceTimeoutMs(300000)
                .setProcessId(UUID.randomUUID().toString())
                .setTopology(new StreamsGroupHeartbeatRequestData.Topology().setEpoch(0).setSubtopologies(List.of(
                    new StreamsGroupHeartbeatRequestData.Subtopology().setSubtopologyId("0").setSourceTopics(List.of(TOPIC)))))
                .setActiveTasks(List.of()).setStandbyTasks(List.of()).setWarmupTasks(List.of())
                .setClientTags(List.of()).setTaskOffsets(null).setTaskEndOffsets(null);
            StreamsGroupHeartbeatResponseData res = send(out, in, join);
            for (int i = 0; i < 60 && res.errorCode() != 0; i++) {  // the group coordinator may still be loading
                Errors error = Errors.forCode(res.errorCode());
                if (error != Errors.NOT_COORDINATOR && error != Errors.COORDINATOR_NOT_AVAILABLE
                        && error != Errors.COORDINATOR_LOAD_IN_PROGRESS) {
                    System.out.println("join refused: " + error + " " + res.errorMessage());
                    return;
                }
                Thread.sleep(1000);
                res = send(out, in, join);
            }
            System.out.println(show("join", join, res));
            int epoch = res.memberEpoch();
            // heartbeat until an answer carries tasks (after the group's initial rebalance delay)
            StreamsGroupHeartbeatRequestData req = heartbeat(epoch);
            for (int i = 0; i < 30; i++) {
                Thread.sleep(1000);
                req = heartbeat(epoch);
                res = send(out, in, req);
                if (res.activeTasks() != null && !res.activeTasks().isEmpty()) break;
                epoch = res.memberEpoch();
            }
            if (res.errorCode() != 0 || res.activeTasks() == null || res.activeTasks().isEmpty()) {
                System.out.println(show("no answer carried tasks", req, res));
                return;
            }
            System.out.println(show("the answer that carries the tasks (LOST)", req, res));
            int lostEpoch = res.memberEpoch();
            // the member never read it: it asks again at the epoch it has, reporting what it owns (nothing)
            StreamsGroupHeartbeatRequestData retry = heartbeat(epoch).setActiveTasks(List.of())
                .setStandbyTasks(List.of()).setWarmupTasks(List.of());
            res = send(out, in, retry);
            System.out.println(show("the retry at the previous epoch", retry, res));
            epoch = res.memberEpoch();
            for (int i = 0; i < 3; i++) {
                Thread.sleep(1000);
                req = heartbeat(epoch);
                res = send(out, in, req);
                System.out.println(show("a later heartbeat", req, res));
                epoch = res.memberEpoch();
            }
            System.out.println(res.errorCode() == 0 && epoch == lostEpoch && res.activeTasks() == null
                ? "REPRODUCED: the member is at epoch " + epoch + " and was never sent the tasks of that epoch"
                : "not reproduced");
        }
    }
}
