// A Java service as a profiler meets one, after the seed's CryptoBench:
// one thread hashes random strings (MessageDigest, JDK code inlined into
// ours by the JIT), builds them, and sums numbers, in units drawn at
// random; one thread sleeps in Thread.sleep, one blocks on a
// ReentrantLock the main thread holds for the phase (LockSupport.park). It measures its own truth: each unit's thread CPU
// time, each wait's wall time.
//
// Usage: java Service.java SECONDS. The fixture protocol of
// profiler-fixtures: a ready line with the ids (thread ids from
// /proc/self/task, found by the names the JVM gives its threads), then
// "go" on stdin starts the measured phase; its results (nanoseconds,
// key=value) are printed when it ends, and the process lingers until
// stdin closes.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.locks.ReentrantLock;

public class Service {
    static final ThreadMXBean CPU = ManagementFactory.getThreadMXBean();
    static final Map<String, Long> RESULTS = new ConcurrentHashMap<>();
    static volatile long sink;

    static String generate(Random rng) {
        StringBuilder text = new StringBuilder();
        for (int i = 0; i < 48; i++) {
            text.append((char) ('a' + rng.nextInt(26)));
        }
        return text.toString();
    }

    static String crypt(MessageDigest digest, String text) {
        byte[] hash = digest.digest(text.getBytes(StandardCharsets.UTF_8));
        StringBuilder hex = new StringBuilder();
        for (byte b : hash) {
            hex.append(Integer.toHexString(b & 0xff));
        }
        return hex.toString();
    }

    static long checksum(long[] data) {
        long sum = 0;
        for (long value : data) {
            sum = sum * 31 + (value ^ (sum >>> 7));
        }
        return sum;
    }

    static void compute(long deadline) throws Exception {
        MessageDigest digest = MessageDigest.getInstance("SHA-256");
        Random units = new Random(1);
        Random rng = new Random(2);
        long[] data = new long[20_000];
        for (int i = 0; i < data.length; i++) {
            data[i] = rng.nextLong();
        }
        String[] texts = new String[64];
        for (int i = 0; i < texts.length; i++) {
            texts[i] = generate(rng);
        }
        long[] spent = new long[3];
        while (System.nanoTime() < deadline) {
            int unit = units.nextInt(4);
            long begin = CPU.getCurrentThreadCpuTime();
            if (unit <= 1) {
                for (String text : texts) {
                    sink += crypt(digest, text).length();
                }
            } else if (unit == 2) {
                for (int i = 0; i < texts.length; i++) {
                    texts[i] = generate(rng);
                }
            } else {
                sink += checksum(data);
            }
            spent[unit <= 1 ? 0 : unit - 1] += CPU.getCurrentThreadCpuTime() - begin;
        }
        RESULTS.put("crypt_ns", spent[0]);
        RESULTS.put("generate_ns", spent[1]);
        RESULTS.put("checksum_ns", spent[2]);
    }

    static void waiter(long deadline) throws InterruptedException {
        long slept = 0;
        while (System.nanoTime() < deadline) {
            long begin = System.nanoTime();
            Thread.sleep(50);
            slept += System.nanoTime() - begin;
        }
        RESULTS.put("waiter_ns", slept);
    }

    static void locker(ReentrantLock lock) {
        long begin = System.nanoTime();
        lock.lock();
        RESULTS.put("locker_ns", System.nanoTime() - begin);
        lock.unlock();
    }

    /// The thread ids of this process's threads named `names`.
    static Map<String, String> tids(String... names) throws Exception {
        Map<String, String> ids = new TreeMap<>();
        while (ids.size() < names.length) {
            try (var tasks = Files.list(Path.of("/proc/self/task"))) {
                for (Path task : (Iterable<Path>) tasks::iterator) {
                    String comm = Files.readString(task.resolve("comm")).trim();
                    for (String name : names) {
                        if (comm.equals(name)) {
                            ids.put(name, task.getFileName().toString());
                        }
                    }
                }
            }
            Thread.sleep(1);
        }
        return ids;
    }

    interface Body {
        void run(long deadline) throws Exception;
    }

    public static void main(String[] args) throws Exception {
        long nanos = (long) (Double.parseDouble(args[0]) * 1e9);
        CountDownLatch go = new CountDownLatch(1);
        long[] deadline = new long[1];
        ReentrantLock lock = new ReentrantLock();
        lock.lock();
        Map<String, Body> bodies = Map.of(
                "compute", Service::compute,
                "waiter", Service::waiter,
                "locker", d -> locker(lock));
        Thread[] threads = bodies.entrySet().stream().map(e -> {
            Thread thread = new Thread(() -> {
                try {
                    // The wait for "go" is outside the measured methods.
                    go.await();
                    e.getValue().run(deadline[0]);
                } catch (Exception x) {
                    throw new RuntimeException(x);
                }
            }, e.getKey());
            thread.start();
            return thread;
        }).toArray(Thread[]::new);
        Map<String, String> ids = tids("compute", "waiter", "locker");
        StringBuilder ready = new StringBuilder("ready pid=" + ProcessHandle.current().pid());
        ids.forEach((k, v) -> ready.append(' ').append(k).append('=').append(v));
        System.out.println(ready);
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in));
        stdin.readLine();
        deadline[0] = System.nanoTime() + nanos;
        go.countDown();
        for (Thread thread : threads) {
            if (thread.getName().equals("locker")) {
                continue;
            }
            thread.join();
        }
        lock.unlock();
        for (Thread thread : threads) {
            thread.join();
        }
        StringBuilder results = new StringBuilder();
        new TreeMap<>(RESULTS).forEach((k, v) -> results.append(k).append('=').append(v).append(' '));
        System.out.println(results.toString().trim());
        while (stdin.read() >= 0) {
        }
    }
}
