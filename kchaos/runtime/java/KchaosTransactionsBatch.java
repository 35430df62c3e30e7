import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.Function;

/**
 * Several invocations of Kafka's TransactionsCommand (KIP-664: list, find-hanging,
 * describe-producers) in one JVM, concurrently. After every run kchaos asks at least four, and
 * a JVM start costs about as much CPU as the query itself (kchaos/runtime/kafka_tools.py).
 *
 * <p>Usage: {@code KchaosTransactionsBatch <out dir> -- <args of invocation 0> -- <args of 1> ...}
 * For invocation i it writes {@code <out dir>/i.out} (what the command printed) and then
 * {@code <out dir>/i.exit}: its exit code on the first line, the command's own error message or
 * the exception's chain after it.
 *
 * <p>The command ends each invocation with Kafka's {@code Exit.exit}, which this class turns into
 * an Error that ends that invocation only. It calls the command's own {@code execute(args,
 * adminSupplier, out, time)} by reflection, so that each invocation prints to its own stream;
 * where that method or Kafka's Exit class is not there (another release's tools), it exits 3
 * having run nothing, and kchaos starts one JVM per invocation as before.
 *
 * <p>Compiled by kchaos against the JDK alone: nothing here names a Kafka class at compile time.
 */
public final class KchaosTransactionsBatch {
    static final int UNSUPPORTED = 3;

    /** Kafka's Exit.exit or Exit.halt, called by the command: ends this invocation. */
    static final class ToolExit extends Error {
        final int code;

        ToolExit(int code, String message) {
            super(message, null, false, false);
            this.code = code;
        }
    }

    public static void main(String[] argv) throws Exception {
        Path outDir = Path.of(argv[0]);
        List<List<String>> invocations = new ArrayList<>();
        for (int i = 1; i < argv.length; i++) {
            if (argv[i].equals("--")) {
                invocations.add(new ArrayList<>());
            } else {
                invocations.get(invocations.size() - 1).add(argv[i]);
            }
        }
        Method execute;
        Method buildAdmin;
        Object time;
        try {
            Class<?> command = Class.forName("org.apache.kafka.tools.TransactionsCommand");
            Class<?> timeClass = Class.forName("org.apache.kafka.common.utils.Time");
            Class<?> namespace = Class.forName("net.sourceforge.argparse4j.inf.Namespace");
            execute = command.getDeclaredMethod("execute", String[].class, Function.class, PrintStream.class, timeClass);
            buildAdmin = command.getDeclaredMethod("buildAdminClient", namespace);
            execute.setAccessible(true);
            buildAdmin.setAccessible(true);
            time = timeClass.getField("SYSTEM").get(null);
            interceptExit();
        } catch (ReflectiveOperationException | RuntimeException e) {
            System.err.println("unsupported by these tools: " + e);
            System.exit(UNSUPPORTED);
            return;
        }
        ExecutorService pool = Executors.newFixedThreadPool(Math.max(1, invocations.size()), runnable -> {
            Thread thread = new Thread(runnable, "kchaos-tools");
            thread.setDaemon(true);
            return thread;
        });
        List<Future<?>> done = new ArrayList<>();
        for (int i = 0; i < invocations.size(); i++) {
            int index = i;
            String[] args = invocations.get(i).toArray(new String[0]);
            done.add(pool.submit(() -> {
                runOne(execute, buildAdmin, time, args, outDir, index);
                return null;
            }));
        }
        for (Future<?> f : done) {
            f.get();
        }
        System.out.flush();
        // the commands' admin clients are never closed (the command expects its JVM to end)
        Runtime.getRuntime().halt(0);
    }

    static void runOne(Method execute, Method buildAdmin, Object time, String[] args, Path outDir, int index)
            throws Exception {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        PrintStream out = new PrintStream(bytes, true, StandardCharsets.UTF_8);
        Function<Object, Object> admin = namespace -> {
            try {
                return buildAdmin.invoke(null, namespace);
            } catch (InvocationTargetException e) {
                throw rethrow(e.getCause());
            } catch (IllegalAccessException e) {
                throw new IllegalStateException(e);
            }
        };
        int code = 0;
        String message = "";
        try {
            execute.invoke(null, args, admin, out, time);
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (cause instanceof ToolExit) {
                code = ((ToolExit) cause).code;
                message = cause.getMessage() == null ? "" : cause.getMessage();
            } else {
                code = 1;
                StringWriter trace = new StringWriter();
                cause.printStackTrace(new PrintWriter(trace));
                message = trace.toString();
            }
        } catch (ToolExit e) {
            code = e.code;
            message = e.getMessage() == null ? "" : e.getMessage();
        }
        out.flush();
        Files.write(outDir.resolve(index + ".out"), bytes.toByteArray());
        Files.writeString(outDir.resolve(index + ".exit"), code + "\n" + message);
    }

    /** Every Kafka Exit class there is (org.apache.kafka.common.utils.internals.Exit from 4.4,
     * org.apache.kafka.common.utils.Exit before) calls our procedure instead of ending the JVM. */
    static void interceptExit() throws ReflectiveOperationException {
        int found = 0;
        for (String name : new String[] {"org.apache.kafka.common.utils.internals.Exit", "org.apache.kafka.common.utils.Exit"}) {
            Class<?> exit;
            try {
                exit = Class.forName(name);
            } catch (ClassNotFoundException e) {
                continue;
            }
            Class<?> procedure = Class.forName(name + "$Procedure");
            Object throwing = Proxy.newProxyInstance(procedure.getClassLoader(), new Class<?>[] {procedure},
                (proxy, method, methodArgs) -> {
                    switch (method.getName()) {
                        case "execute":
                            throw new ToolExit((Integer) methodArgs[0], (String) methodArgs[1]);
                        case "hashCode":
                            return System.identityHashCode(proxy);
                        case "equals":
                            return proxy == methodArgs[0];
                        default:
                            return "kchaos exit procedure";
                    }
                });
            exit.getMethod("setExitProcedure", procedure).invoke(null, throwing);
            exit.getMethod("setHaltProcedure", procedure).invoke(null, throwing);
            found++;
        }
        if (found == 0) {
            throw new ClassNotFoundException("no org.apache.kafka.common.utils Exit class");
        }
    }

    private static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException) {
            return (RuntimeException) t;
        }
        if (t instanceof Error) {
            throw (Error) t;
        }
        return new IllegalStateException(t);
    }
}
