// Plain Java CPU work, no intrinsics, no allocation in the loop: the JIT
// inlines the hot small methods into their callers, so a profiler is right
// only if it names inlined frames. One thread runs units drawn at random
// (each a few methods deep, the leaf inlined); the reference is JFR on
// the same run (it samples this code whole: no stubs, no VM calls).
//
// Usage: java Inlined SECONDS. The fixture protocol: a ready line with
// the compute thread's id, "go" on stdin, the phase, a result line (each
// unit's thread CPU, nanoseconds), then it lingers until stdin closes.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;
import java.util.concurrent.CountDownLatch;

public class Inlined {
    static final ThreadMXBean CPU = ManagementFactory.getThreadMXBean();
    static volatile long sink;

    static long weigh(long v) {
        return (v * 0x9E3779B97F4A7C15L) ^ (v >>> 29);
    }

    static long sum(long[] values) {
        long acc = 0;
        for (long v : values) {
            acc += weigh(v);
        }
        return acc;
    }

    static double term(int k) {
        return 1.0 / ((double) k * k);
    }

    static double series(int n) {
        double s = 0;
        for (int k = 1; k < n; k++) {
            s += term(k);
        }
        return s;
    }

    static boolean less(int[] a, int i, int j) {
        return a[i] < a[j];
    }

    static void sortSmall(int[] a) {
        for (int i = 1; i < a.length; i++) {
            for (int j = i; j > 0 && less(a, j, j - 1); j--) {
                int t = a[j];
                a[j] = a[j - 1];
                a[j - 1] = t;
            }
        }
    }

    static void shuffle(int[] a, Random rng) {
        for (int i = a.length - 1; i > 0; i--) {
            int j = rng.nextInt(i + 1);
            int t = a[i];
            a[i] = a[j];
            a[j] = t;
        }
    }

    static long[] compute(long deadline) {
        Random units = new Random(1);
        Random rng = new Random(2);
        long[] values = new long[50_000];
        for (int i = 0; i < values.length; i++) {
            values[i] = rng.nextLong();
        }
        int[] small = new int[300];
        for (int i = 0; i < small.length; i++) {
            small[i] = i;
        }
        long[] spent = new long[3];
        while (System.nanoTime() < deadline) {
            int unit = units.nextInt(3);
            long begin = CPU.getCurrentThreadCpuTime();
            if (unit == 0) {
                sink += sum(values);
            } else if (unit == 1) {
                sink += (long) series(200_000);
            } else {
                shuffle(small, rng);
                sortSmall(small);
                sink += small[7];
            }
            spent[unit] += CPU.getCurrentThreadCpuTime() - begin;
        }
        return spent;
    }

    public static void main(String[] args) throws Exception {
        long nanos = (long) (Double.parseDouble(args[0]) * 1e9);
        CountDownLatch go = new CountDownLatch(1);
        long[] deadline = new long[1];
        long[][] spent = new long[1][];
        Thread compute = new Thread(() -> {
            try {
                go.await();
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
            spent[0] = compute(deadline[0]);
        }, "compute");
        compute.start();
        String tid = null;
        while (tid == null) {
            try (var tasks = Files.list(Path.of("/proc/self/task"))) {
                for (Path task : (Iterable<Path>) tasks::iterator) {
                    if (Files.readString(task.resolve("comm")).trim().equals("compute")) {
                        tid = task.getFileName().toString();
                    }
                }
            }
        }
        System.out.println("ready pid=" + ProcessHandle.current().pid() + " compute=" + tid);
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in));
        stdin.readLine();
        deadline[0] = System.nanoTime() + nanos;
        go.countDown();
        compute.join();
        System.out.println("sum_ns=" + spent[0][0] + " series_ns=" + spent[0][1]
                + " sort_ns=" + spent[0][2]);
        while (stdin.read() >= 0) {
        }
    }
}
